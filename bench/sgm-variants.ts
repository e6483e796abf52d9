/**
 * Where the tensor-core f16 mul_mat spends its time, on raw Dawn: the 8x2:2x4:32 tiling, the backend's
 * first until run au (16 subgroups of 2x4 16x16 fragments, 256 x 128 results per workgroup, K steps of 32
 * staged through shared memory, the next step prefetched into registers) written for one square size,
 * then the same kernel with one phase taken out at a time. Not project code: a profile by subtraction, to
 * choose what to change next.
 *
 *   tsx sgm-variants.ts [N]
 *
 * Variants: `full` (the backend's schedule), `no global loads` (the first K step's registers staged again
 * and again), `no staging` (tiles staged once before the loop, no barriers in it), `no fragment loads`
 * (fragments loaded once, multiply-accumulates alone in the loop, still staged), `mma only`; and two other
 * schedules: `wide` (global loads of 16 bytes: two vec4<f16> per load), `global fragments` (no shared
 * memory: fragments loaded from the storage buffers, without and with the next step prefetched); `read_write`:
 * a and b bound read_write.
 */
import { openDawn } from "./dawn.js"
import { openMatrixDevice, timeProducts } from "./raw-dawn.js"

const N = Number(process.argv[2] ?? 4096)
const [SR, SC, FR, FC, TK] = [8, 2, 2, 4, 32]
const TN = SR * FR * 16 // rows of b per workgroup
const TM = SC * FC * 16 // rows of a per workgroup
const LS = TK + 8 // a staged row, padded against bank conflicts
const range = (n: number) => Array.from({ length: n }, (_, i) => i)

/** extensions and bindings: a and b of `vt` with `access`, d of f32 */
const head = (vt: string, access: string) =>
  `enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
@group(0) @binding(0) var<storage, ${access}> a: array<${vt}>;
@group(0) @binding(1) var<storage, ${access}> b: array<${vt}>;
@group(0) @binding(2) var<storage, read_write> d: array<f32>;`

/** the entry point: 16 subgroups, this one's place (sr, sc) and the workgroup's first result (m0, n0) */
const ENTRY = `@compute @workgroup_size(512)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let sg = lid / 32u;
  let sr = sg / ${SC}u;
  let sc = sg % ${SC}u;
  let m0 = (wid.x % ${N / TM}u) * ${TM}u;
  let n0 = (wid.x / ${N / TM}u) * ${TN}u;`

interface Variant {
  readonly loads: boolean
  readonly staging: boolean
  readonly fragments: boolean
  readonly wide: boolean
  /** a and b bound read_write, as where they share a buffer with the result */
  readonly rw?: boolean
}

const kernel = ({ fragments, loads, rw, staging, wide }: Variant) => {
  const access = rw === true ? "read_write" : "read"
  // a global load is `w` f16: 4 (vec4<f16>) or 8 (vec4<u32>, two vec4<f16>)
  const w = wide ? 8 : 4
  const per = (rows: number) => (rows * TK) / w / 512
  const load = (t: "x" | "w", rows: number) => {
    const [op, r0] = t === "x" ? ["b", "n0"] : ["a", "m0"]
    return range(per(rows)).map((e) =>
      `    { let i = ${e * 512}u + lid; let r = ${r0} + i / ${TK / w}u; let k = k0 + (i % ${
        TK / w
      }u) * ${w}u; ${t}r[${e}] = ${op}[(r * ${N}u + k) / ${w}u]; }`
    ).join("\n")
  }
  const stash = (t: "x" | "w", rows: number) =>
    range(per(rows)).map((e) => {
      const at = `(i / ${TK / w}u) * ${LS / 4}u + (i % ${TK / w}u) * ${w / 4}u`
      const S = `${t.toUpperCase()}s`
      const v = `${t}r[${e}]`
      return wide
        ? `    { let i = ${
          e * 512
        }u + lid; let o = ${at}; ${S}[o] = bitcast<vec4<f16>>(${v}.xy); ${S}[o + 1u] = bitcast<vec4<f16>>(${v}.zw); }`
        : `    { let i = ${e * 512}u + lid; ${S}[${at}] = ${v}; }`
    }).join("\n")
  const frag = (i: number, j: number) => `c${i}_${j}`
  const fragLoads = (s: number) => [
    ...range(FR).map((i) =>
      `    let x${i}_${s} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&Xs, (sr * ${FR * 16}u + ${
        i * 16
      }u) * ${LS / 4}u + ${(s * 16) / 4}u, ${LS / 4}u);`
    ),
    ...range(FC).map((j) =>
      `    let w${j}_${s} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>, col_major>(&Ws, (sc * ${
        FC * 16
      }u + ${j * 16}u) * ${LS / 4}u + ${(s * 16) / 4}u, ${LS / 4}u);`
    )
  ]
  const mmas = (s: number) =>
    range(FR).flatMap((i) =>
      range(FC).map((j) =>
        `    ${frag(i, j)} = subgroupMatrixMultiplyAccumulate(x${i}_${s}, w${j}_${s}, ${frag(i, j)});`
      )
    )
  const steps = range(TK / 16).map((s) => [...(fragments ? fragLoads(s) : []), ...mmas(s)].join("\n")).join("\n")
  const vt = wide ? "vec4<u32>" : "vec4<f16>"
  return `${head(vt, access)}
var<workgroup> Xs: array<vec4<f16>, ${(TN * LS) / 4}>;
var<workgroup> Ws: array<vec4<f16>, ${(TM * LS) / 4}>;
${ENTRY}
  var xr: array<${vt}, ${per(TN)}>;
  var wr: array<${vt}, ${per(TM)}>;
${
    range(FR).flatMap((i) => range(FC).map((j) => `  var ${frag(i, j)}: subgroup_matrix_result<f32, 16, 16>;`)).join(
      "\n"
    )
  }
  {
    let k0 = 0u;
${load("x", TN)}
${load("w", TM)}
  }
${staging ? "" : `${stash("x", TN)}\n${stash("w", TM)}\n  workgroupBarrier();`}
${fragments ? "" : range(TK / 16).flatMap(fragLoads).join("\n")}
  for (var k0 = 0u; k0 < ${N}u; k0 += ${TK}u) {
${staging ? `${stash("x", TN)}\n${stash("w", TM)}\n    workgroupBarrier();` : ""}
${loads ? `    if (k0 + ${TK}u < ${N}u) {\n      let k0 = k0 + ${TK}u;\n${load("x", TN)}\n${load("w", TM)}\n    }` : ""}
${steps}
${staging ? "    workgroupBarrier();" : ""}
  }
${
    range(FR).flatMap((i) =>
      range(FC).map((j) =>
        `  subgroupMatrixStore<row_major>(&d, (n0 + sr * ${FR * 16}u + ${i * 16}u) * ${N}u + m0 + sc * ${FC * 16}u + ${
          j * 16
        }u, ${frag(i, j)}, ${N}u);`
      )
    ).join("\n")
  }
}`
}

/**
 * No shared memory: each subgroup loads its fragments straight from the storage buffers (the 2 subgroups
 * on the same rows of b, and the 8 on the same rows of a, meet in the L1 cache) and never waits for the
 * others; `prefetch` loads the next K step's fragments before this step's multiply-accumulates.
 */
const globalKernel = (prefetch: boolean) => {
  const R = N / 4 // a row of K f16, in vec4s
  const ld = (k: string, p = "") => [
    ...range(FR).map((i) =>
      `${p}x${i} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&b, xo + ${
        i * 16 * R
      }u + ${k} / 4u, ${R}u);`
    ),
    ...range(FC).map((j) =>
      `${p}w${j} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>, col_major>(&a, wo + ${
        j * 16 * R
      }u + ${k} / 4u, ${R}u);`
    )
  ]
  const mmas = range(FR).flatMap((i) =>
    range(FC).map((j) => `    c${i}_${j} = subgroupMatrixMultiplyAccumulate(x${i}, w${j}, c${i}_${j});`)
  )
  const body = prefetch
    ? [
      `    let kn = min(k0 + 16u, ${N - 16}u);`,
      ...ld("kn", "let n").map((l) => `    ${l}`),
      ...mmas,
      ...[...range(FR).map((i) => `x${i}`), ...range(FC).map((j) => `w${j}`)].map((v) => `    ${v} = n${v};`)
    ]
    : [...ld("k0", "let ").map((l) => `    ${l}`), ...mmas]
  return `${head("vec4<f16>", "read")}
${ENTRY}
  let xo = (n0 + sr * ${FR * 16}u) * ${R}u;
  let wo = (m0 + sc * ${FC * 16}u) * ${R}u;
${range(FR).flatMap((i) => range(FC).map((j) => `  var c${i}_${j}: subgroup_matrix_result<f32, 16, 16>;`)).join("\n")}
${prefetch ? ld("0u", "var ").map((l) => `  ${l}`).join("\n") : ""}
  for (var k0 = 0u; k0 < ${N}u; k0 += 16u) {
${body.join("\n")}
  }
${
    range(FR).flatMap((i) =>
      range(FC).map((j) =>
        `  subgroupMatrixStore<row_major>(&d, (n0 + sr * ${FR * 16}u + ${i * 16}u) * ${N}u + m0 + sc * ${FC * 16}u + ${
          j * 16
        }u, c${i}_${j}, ${N}u);`
      )
    ).join("\n")
  }
}`
}

/** f16 bits of a number exactly representable in f16 (normal or zero) */
const f16bits = (x: number) => {
  if (x === 0) return 0
  const v = Math.abs(x)
  const e = Math.floor(Math.log2(v))
  return (x < 0 ? 0x8000 : 0) | ((e + 15) << 10) | Math.round((v / 2 ** e - 1) * 1024)
}

const main = async () => {
  const opened = await openMatrixDevice(await openDawn())
  if (opened === undefined) return
  const { device, name } = opened
  // values m / 256, |m| <= 256, not zero: exact in f16
  const values = () => Float32Array.from({ length: N * N }, () => ((Math.floor(Math.random() * 512) - 256) || 1) / 256)
  const [A, B] = [values(), values()]
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC
  const upload = (x: Float32Array) => {
    const buffer = device.createBuffer({ size: x.length * 2, usage })
    device.queue.writeBuffer(buffer, 0, Uint16Array.from(x, f16bits))
    return buffer
  }
  const [a, b] = [upload(A), upload(B)]
  const d = device.createBuffer({ size: N * N * 4, usage })
  const full: Variant = { loads: true, staging: true, fragments: true, wide: false }
  const variants: ReadonlyArray<[string, Variant, string?]> = [
    ["full", { loads: true, staging: true, fragments: true, wide: false }],
    ["wide", { loads: true, staging: true, fragments: true, wide: true }],
    ["no global loads", { loads: false, staging: true, fragments: true, wide: false }],
    ["no staging", { loads: false, staging: false, fragments: true, wide: false }],
    ["no fragment loads", { loads: true, staging: true, fragments: false, wide: false }],
    ["mma only", { loads: false, staging: false, fragments: false, wide: false }],
    ["full, read_write", { ...full, rw: true }],
    ["wide, read_write", { ...full, wide: true, rw: true }],
    ["global fragments", full, globalKernel(false)],
    ["global, prefetched", full, globalKernel(true)],
    ["full (again)", full]
  ]
  console.log(`${name}: ${N}^3 f16, 8x2:2x4:32`)
  await timeProducts(
    device,
    N,
    [A, B],
    [a, b, d],
    (N / TM) * (N / TN),
    variants.map(([name, v, code]) => ({
      name,
      code: code ?? kernel(v),
      check: v.loads && v.staging && v.fragments
    }))
  )
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
