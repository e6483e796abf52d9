/**
 * Matrix-vector layouts on raw Dawn, outside the backend: y = A x for A of M rows of K f32, each layout
 * timed as 50 dispatches in one submit after a warm-up of about 2 s (the GPU's clock climbs under load),
 * and checked against the CPU on 64 rows. To choose the backend's layout; not project code.
 *
 *   tsx mv-variants.ts [K] [M]
 *
 * Layouts: `wg TxR uU` workgroups of T threads on R rows at once, U vec4 of each row in flight per
 * thread (subgroup + shared reduction; `wg 256x1 u4` is the backend's kernel); `ceiling`: the same loads
 * of A without x (what reading A alone costs); `sg SxR uU` S subgroups per workgroup, each on R rows at
 * once, U vec4 of each row in flight per lane, reduced by subgroupAdd alone (no barrier).
 *
 *   SWEEP=1 tsx mv-variants.ts 4096 4096   # also a layout and the ceiling over M/4 .. 4M, and an empty pass
 */
import { dispatcher, openRawDevice, readBack, report, settledMs } from "./raw-dawn.js"

const K = Number(process.argv[2] ?? 4096)
const M = Number(process.argv[3] ?? 4096)
// SWEEP=1: a layout and the read ceiling over M = M/4 .. 4M (the slope is the bandwidth, the intercept
// the fixed cost of a dispatch)
const sweep = process.env.SWEEP === "1"
const maxM = sweep ? 4 * M : M
const K4 = K / 4

const main = async () => {
  const { device, name } = await openRawDevice()
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC
  const A = new Float32Array(K * maxM).map(() => Math.random() - 0.5)
  const X = new Float32Array(K).map(() => Math.random() - 0.5)
  const a = device.createBuffer({ size: A.byteLength, usage })
  const x = device.createBuffer({ size: X.byteLength, usage })
  const y = device.createBuffer({ size: maxM * 4, usage })
  device.queue.writeBuffer(a, 0, A)
  device.queue.writeBuffer(x, 0, X)
  const head = `enable subgroups;
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;`

  /** T threads per workgroup on R rows at once, U vec4 of each row in flight; `ceiling`: a's loads alone */
  const perWorkgroup = (T: number, R: number, U: number, M: number, ceiling = false) =>
    `${head}
var<workgroup> red: array<f32, ${R * 32}>;
@compute @workgroup_size(${T})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_size) sgs: u32, @builtin(subgroup_invocation_id) sgl: u32) {
  let m0 = wid.x * ${R}u;
  var acc: array<f32, ${R}>;
  for (var k0 = lid; k0 < ${K4}u; k0 += ${T * U}u) {
    var av: array<vec4<f32>, ${R * U}>;
    for (var u = 0u; u < ${U}u; u++) {
      let k = k0 + u * ${T}u;
      if (k < ${K4}u) {
        for (var r = 0u; r < ${R}u; r++) { av[r * ${U}u + u] = a[min(m0 + r, ${M - 1}u) * ${K4}u + k]; }
      }
    }
    for (var u = 0u; u < ${U}u; u++) {
      let k = k0 + u * ${T}u;
      if (k < ${K4}u) {
        let xv = ${ceiling ? "vec4<f32>(x[0].x)" : "x[k]"};
        for (var r = 0u; r < ${R}u; r++) { acc[r] += dot(av[r * ${U}u + u], xv); }
      }
    }
  }
  for (var r = 0u; r < ${R}u; r++) {
    let s = subgroupAdd(acc[r]);
    if (sgl == 0u) { red[r * 32u + lid / sgs] = s; }
  }
  workgroupBarrier();
  if (lid < ${R}u && m0 + lid < ${M}u) {
    var t = red[lid * 32u];
    for (var i = 1u; i < ${T}u / sgs; i++) { t += red[lid * 32u + i]; }
    y[m0 + lid] = t;
  }
}`

  const perSubgroup = (S: number, R: number, U: number, M: number) =>
    `${head}
@compute @workgroup_size(${32 * S})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_size) sgs: u32, @builtin(subgroup_invocation_id) sgl: u32) {
  let m0 = (wid.x * ${S}u + lid / sgs) * ${R}u;
  var acc: array<f32, ${R}>;
  let step = sgs * ${U}u;
  for (var k0 = sgl; k0 < ${K4}u; k0 += step) {
    var av: array<vec4<f32>, ${R * U}>;
    var xv: array<vec4<f32>, ${U}>;
    for (var u = 0u; u < ${U}u; u++) {
      let k = k0 + u * sgs;
      if (k < ${K4}u) {
        xv[u] = x[k];
        for (var r = 0u; r < ${R}u; r++) { av[r * ${U}u + u] = a[min(m0 + r, ${M - 1}u) * ${K4}u + k]; }
      }
    }
    for (var u = 0u; u < ${U}u; u++) {
      for (var r = 0u; r < ${R}u; r++) { acc[r] += dot(av[r * ${U}u + u], xv[u]); }
    }
  }
  for (var r = 0u; r < ${R}u; r++) {
    let s = subgroupAdd(acc[r]);
    if (sgl == 0u && m0 + r < ${M}u) { y[m0 + r] = s; }
  }
}`

  const run = async (name: string, code: string, groups: number, M: number) => {
    const go = await dispatcher(device, name, code, [{ buffer: a }, { buffer: x }, { buffer: y }], groups)
    if (go === undefined) return
    // correctness first: 64 rows against the CPU
    device.queue.writeBuffer(y, 0, new Float32Array(M))
    await go(1)
    const got = await readBack(device, { buffer: y }, Math.max(M, 1) * 4)
    let err = 0
    let norm = 0
    for (let i = 0; i < (M > 0 ? 64 : 0); i++) {
      const m = Math.floor((i * (M - 1)) / 63)
      let s = 0
      for (let k = 0; k < K; k++) s += A[m * K + k] * X[k]
      err += (got[m] - s) ** 2
      norm += s * s
    }
    report(name, await settledMs(go), 4 * (K * M + K + M), err / norm)
  }

  console.log(`${name}: K ${K} M ${M}`)
  if (sweep) {
    // an empty dispatch: what a pass costs with no memory traffic
    await run(
      "empty",
      `${head}\n@compute @workgroup_size(64) fn main() { if (x[0].x == 12345.0) { y[0] = a[0].x; } }`,
      1,
      0
    )
  }
  for (
    const [T, R, U] of [[256, 1, 4], [256, 1, 2], [128, 1, 8], [128, 1, 4], [256, 2, 2], [128, 2, 4], [128, 4, 2], [
      64,
      4,
      4
    ]]
  ) {
    await run(`wg ${T}x${R} u${U}`, perWorkgroup(T, R, U, M), Math.ceil(M / R), M)
  }
  if (sweep) {
    for (const m of [M / 4, M / 2, M, 2 * M, 4 * M]) {
      await run(`wg 256x2 u2 M ${m}`, perWorkgroup(256, 2, 2, m), m / 2, m)
      await run(`ceiling M ${m}`, perWorkgroup(256, 2, 2, m, true), m / 2, m)
    }
    return
  }
  await run("ceiling 256x1 u4", perWorkgroup(256, 1, 4, M, true), M, M)
  for (
    const [S, R, U] of [
      [8, 1, 4],
      [8, 1, 8],
      [4, 1, 8],
      [8, 2, 4],
      [8, 2, 8],
      [4, 2, 4],
      [4, 4, 2],
      [8, 4, 2],
      [2, 4, 4]
    ]
  ) {
    await run(`sg ${S}x${R} u${U}`, perSubgroup(S, R, U, M), Math.ceil(M / (S * R)), M)
  }
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
