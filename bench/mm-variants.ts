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
 * loads and staging in the loop), `fma only`; and `full, a b read_write` (the operands bound read_write).
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
}

const kernel = ({ loads, reads, rw, staging }: Variant) => {
  const access = rw === true ? "read_write" : "read"
  const load =
    `    { let r = lid / 2u; let k = k0 + (lid % 2u) * 4u; ar = a[((m0 + r) * ${N}u + k) / 4u]; br = b[((n0 + r) * ${N}u + k) / 4u]; }`
  const stash = `    { let r = lid / 2u; let k = (lid % 2u) * 4u; ${
    range(4).map((c) => `As[k + ${c}u][r / 4u][r % 4u] = ar[${c}]; Bs[k + ${c}u][r / 4u][r % 4u] = br[${c}];`).join(" ")
  } }`
  const read = (k: string) =>
    `      a0 = As[${k}][tx]; a1 = As[${k}][tx + 8u]; b0 = Bs[${k}][ty]; b1 = Bs[${k}][ty + 4u];`
  const fmas = range(2).flatMap((i) =>
    range(8).map((j) => `      c${i}_${j} = fma(a${i}, vec4<f32>(b${j >> 2}[${j % 4}]), c${i}_${j});`)
  ).join("\n")
  return `@group(0) @binding(0) var<storage, ${access}> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, ${access}> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> d: array<f32>;
var<workgroup> As: array<array<vec4<f32>, 33>, 8>;
var<workgroup> Bs: array<array<vec4<f32>, 33>, 8>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m0 = (wid.x % ${N / 128}u) * 128u;
  let n0 = (wid.x / ${N / 128}u) * 128u;
  let tx = (lid / 32u) % 2u * 16u + lid % 8u;
  let ty = (lid / 64u) * 8u + (lid % 32u) / 8u;
  var ar: vec4<f32>;
  var br: vec4<f32>;
  var a0: vec4<f32>; var a1: vec4<f32>; var b0: vec4<f32>; var b1: vec4<f32>;
${range(2).flatMap((i) => range(8).map((j) => `  var c${i}_${j} = vec4<f32>(0.0);`)).join("\n")}
  {
    let k0 = 0u;
${load}
  }
${staging ? "" : `${stash}\n  workgroupBarrier();`}
${reads ? "" : read("0u")}
  for (var k0 = 0u; k0 < ${N}u; k0 += 8u) {
${staging ? `${stash}\n    workgroupBarrier();` : ""}
${loads ? `    if (k0 + 8u < ${N}u) {\n      let k0 = k0 + 8u;\n${load}\n    }` : ""}
    for (var k = 0u; k < 8u; k++) {
${reads ? read("k") : ""}
${fmas}
    }
${staging ? "    workgroupBarrier();" : ""}
  }
${
    range(2).flatMap((i) =>
      range(8).map((j) =>
        `  { let nn = n0 + (ty + ${(j >> 2) * 4}u) * 4u + ${j % 4}u; let m = m0 + (tx + ${
          i * 8
        }u) * 4u; for (var c = 0u; c < 4u; c++) { d[nn * ${N}u + m + c] = c${i}_${j}[c]; } }`
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
  const variants: ReadonlyArray<[string, Variant]> = [
    ["full", { loads: true, staging: true, reads: true }],
    ["no global loads", { loads: false, staging: true, reads: true }],
    ["no staging", { loads: false, staging: false, reads: true }],
    ["no shared reads", { loads: true, staging: true, reads: false }],
    ["fma only", { loads: false, staging: false, reads: false }],
    ["full, a b read_write", { loads: true, staging: true, reads: true, rw: true }],
    ["full (again)", { loads: true, staging: true, reads: true }]
  ]
  console.log(
    `${name}: ${N}^3 f32, 8x8:8 by subgroup${toggles.length > 0 ? `, toggles ${toggles.join(" ")}` : ""}`
  )
  await timeProducts(
    device,
    N,
    [A, B],
    [a, b, d],
    (N / 128) ** 2,
    variants.map(([name, v]) => ({ name, code: kernel(v), check: v.loads && v.staging && v.reads }))
  )
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
