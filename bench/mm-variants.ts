/**
 * Where the register-tiled f32 mul_mat spends its time, on raw Dawn: the backend's 8x8:8 kernel (256
 * threads by subgroup, 128 x 128 results per workgroup, K steps of 8 staged through shared memory, the
 * next step prefetched into registers) written for one square size, then with one phase taken out at a
 * time. Not project code: a profile by subtraction, to choose what to change next.
 *
 *   tsx mm-variants.ts [N] [dawn toggle ...]     e.g. tsx mm-variants.ts 4096 disable_robustness
 *
 * Variants: `full`, `no global loads` (the first K step staged again and again), `no staging` (staged
 * once, no barriers in the loop), `no shared reads` (each thread's operands read once, multiply-adds,
 * loads and staging in the loop), `fma only`. Then the ways the backend's kernel differs from `full`, one
 * at a time and all together (`like the backend`), to find what costs it the most: `a b read_write` (the
 * operands bound read_write, as where they share the plan's buffer with the result), `register arrays`
 * (the prefetch in `array<vec4<f32>, 1>`), `reads as lets` (the operands read into `let`s inside the K
 * loop), `uniform sizes` (sizes and strides from a uniform buffer), `load checks` (bounds checks on the
 * global loads), `16x16 workgroup` (declared in two dimensions).
 */
import { openRawDevice, timeProducts } from "./raw-dawn.js"

const [N = 4096, ...toggles] = process.argv.slice(2).map((s, i) => (i === 0 ? Number(s) : s)) as [
  number,
  ...Array<string>
]
const range = (n: number) => Array.from({ length: n }, (_, i) => i)

interface Variant {
  readonly loads: boolean
  readonly staging: boolean
  readonly reads: boolean
  /** a and b bound read_write, as where they share a buffer with the result */
  readonly rw?: boolean
  readonly arrays?: boolean
  readonly lets?: boolean
  readonly uniform?: boolean
  readonly checks?: boolean
  readonly wg2d?: boolean
}

const kernel = ({ arrays, checks, lets, loads, reads, rw, staging, uniform, wg2d }: Variant) => {
  const access = rw === true ? "read_write" : "read"
  // the size, a compile-time constant or the uniform's
  const n = uniform === true ? "P.n" : `${N}u`
  const [ar, br] = arrays === true ? ["ar[0]", "br[0]"] : ["ar", "br"]
  // as the backend: a load out of range gives zeros
  const guarded = (to: string, r: string, from: string) => {
    const body = `${to} = ${from}[((${r}) * ${n} + k) / 4u];`
    return checks === true ? `if (${r} < ${n} && k < ${n}) { ${body} } else { ${to} = vec4<f32>(0.0); }` : body
  }
  const load = `    { let r = lid / 2u; let k = k0 + (lid % 2u) * 4u; ${guarded(ar, "m0 + r", "a")} ${
    guarded(br, "n0 + r", "b")
  } }`
  const stash = `    { let r = lid / 2u; let k = (lid % 2u) * 4u; ${
    range(4).map((c) => `As[k + ${c}u][r / 4u][r % 4u] = ${ar}[${c}]; Bs[k + ${c}u][r / 4u][r % 4u] = ${br}[${c}];`)
      .join(" ")
  } }`
  const read = (k: string, decl: string) =>
    `      ${decl}a0 = As[${k}][tx]; ${decl}a1 = As[${k}][tx + 8u]; ${decl}b0 = Bs[${k}][ty]; ${decl}b1 = Bs[${k}][ty + 4u];`
  const fmas = range(2).flatMap((i) =>
    range(8).map((j) => `      c${i}_${j} = fma(a${i}, vec4<f32>(b${j >> 2}[${j % 4}]), c${i}_${j});`)
  ).join("\n")
  const inLoop = reads && lets === true
  return `@group(0) @binding(0) var<storage, ${access}> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, ${access}> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> d: array<f32>;
struct Params { n: u32 }
@group(0) @binding(3) var<uniform> P: Params;
var<workgroup> As: array<array<vec4<f32>, 33>, 8>;
var<workgroup> Bs: array<array<vec4<f32>, 33>, 8>;
@compute @workgroup_size(${wg2d === true ? "16, 16" : "256"})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  _ = P.n;
  let m0 = (wid.x % ${N / 128}u) * 128u;
  let n0 = (wid.x / ${N / 128}u) * 128u;
  let tx = (lid / 32u) % 2u * 16u + lid % 8u;
  let ty = (lid / 64u) * 8u + (lid % 32u) / 8u;
  var ar: ${arrays === true ? "array<vec4<f32>, 1>" : "vec4<f32>"};
  var br: ${arrays === true ? "array<vec4<f32>, 1>" : "vec4<f32>"};
${inLoop ? "" : "  var a0: vec4<f32>; var a1: vec4<f32>; var b0: vec4<f32>; var b1: vec4<f32>;"}
${range(2).flatMap((i) => range(8).map((j) => `  var c${i}_${j} = vec4<f32>(0.0);`)).join("\n")}
  {
    let k0 = 0u;
${load}
  }
${staging ? "" : `${stash}\n  workgroupBarrier();`}
${reads ? "" : read("0u", "")}
  for (var k0 = 0u; k0 < ${n}; k0 += 8u) {
${staging ? `${stash}\n    workgroupBarrier();` : ""}
${loads ? `    if (k0 + 8u < ${n}) {\n      let k0 = k0 + 8u;\n${load}\n    }` : ""}
    for (var k = 0u; k < 8u; k++) {
${reads ? read("k", inLoop ? "let " : "") : ""}
${fmas}
    }
${staging ? "    workgroupBarrier();" : ""}
  }
${
    range(2).flatMap((i) =>
      range(8).map((j) =>
        `  { let nn = n0 + (ty + ${(j >> 2) * 4}u) * 4u + ${j % 4}u; let m = m0 + (tx + ${
          i * 8
        }u) * 4u; for (var c = 0u; c < 4u; c++) { d[nn * ${n} + m + c] = c${i}_${j}[c]; } }`
      )
    ).join("\n")
  }
}`
}

const main = async () => {
  const { device, name } = await openRawDevice(toggles)
  const values = () => new Float32Array(N * N).map(() => Math.random() - 0.5)
  const [A, B] = [values(), values()]
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC
  const upload = (x: Float32Array<ArrayBuffer>) => {
    const buffer = device.createBuffer({ size: x.byteLength, usage })
    device.queue.writeBuffer(buffer, 0, x)
    return buffer
  }
  const [a, b] = [upload(A), upload(B)]
  const d = device.createBuffer({ size: N * N * 4, usage })
  const params = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST })
  device.queue.writeBuffer(params, 0, new Uint32Array([N, 0, 0, 0]))
  const full: Variant = { loads: true, staging: true, reads: true }
  const variants: ReadonlyArray<[string, Variant]> = [
    ["full", { loads: true, staging: true, reads: true }],
    ["no global loads", { loads: false, staging: true, reads: true }],
    ["no staging", { loads: false, staging: false, reads: true }],
    ["no shared reads", { loads: true, staging: true, reads: false }],
    ["fma only", { loads: false, staging: false, reads: false }],
    ["a b read_write", { ...full, rw: true }],
    ["register arrays", { ...full, arrays: true }],
    ["reads as lets", { ...full, lets: true }],
    ["uniform sizes", { ...full, uniform: true }],
    ["load checks", { ...full, checks: true }],
    ["16x16 workgroup", { ...full, wg2d: true }],
    ["like the backend", { ...full, rw: true, arrays: true, lets: true, uniform: true, checks: true, wg2d: true }],
    ["full (again)", full]
  ]
  console.log(
    `${name}: ${N}^3 f32, 8x8:8 by subgroup${toggles.length > 0 ? `, toggles ${toggles.join(" ")}` : ""}`
  )
  await timeProducts(
    device,
    N,
    [A, B],
    [a, b, d, params],
    (N / 128) ** 2,
    variants.map(([name, v]) => ({ name, code: kernel(v), check: v.loads && v.staging && v.reads }))
  )
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
