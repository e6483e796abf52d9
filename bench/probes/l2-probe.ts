/**
 * Whether a decoding step's output projection would gain from having its weights read into L2 while decode
 * attention runs (attention is bound by its chain of loads, not by bytes, so spare workgroups could read the
 * next product's weights beside it). On raw Dawn, GPU time per pass over rotating weight copies (L2 cold):
 *   cold  [lat, mv(c_i)]              a latency-bound kernel, then the q8_0 product over a cold copy
 *   warm  [lat + read(c_i), mv(c_i)]  the same kernel with G extra workgroups reading the product's weights
 *   lat / lat+read alone, and mv alone, to see what the reads cost the kernel they ride on.
 * A measuring aid, not project code (`node l2.mjs [M] [K] [CHAIN]`).
 */
import { rawDevice } from "./raw-dawn.js"

const M = Number(process.argv[2] ?? 4096)
const K = Number(process.argv[3] ?? 4096)
const CHAIN = Number(process.argv[4] ?? 48)
const COPIES = 8
const ITERS = 48
const PW = 17
const rowWords = (K / 64) * PW
const words = M * rowWords
/** the latency kernel's workgroups (as decode attention's 256) and its table of dependent loads (in L2) */
const LAT_GROUPS = 256
const TABLE = 1 << 20

/** the int8 product, a lane a pair of q8_0 blocks, 8 subgroups of 2 rows, b already rounded */
const mv = `
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b8: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bd: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let lane = lid % 32u;
  let row0 = (wid.x * 8u + lid / 32u) * 2u;
  var acc = array<f32, 2>(0.0, 0.0);
  for (var p = lane; p < ${K / 64}u; p += 32u) {
    let e0 = bd[2u * p];
    let e1 = bd[2u * p + 1u];
    for (var r = 0u; r < 2u; r++) {
      let o = (row0 + r) * ${rowWords}u + p * ${PW}u;
      var w: array<u32, ${PW}>;
      for (var k = 0u; k < ${PW}u; k++) { w[k] = a[o + k]; }
      var s0 = 0i;
      var s1 = 0i;
      for (var i = 0u; i < 8u; i++) {
        let lo = (w[i] >> 16u) | (w[i + 1u] << 16u);
        let y0 = b8[(4u * p + i / 4u)];
        let y1 = b8[(4u * p + 2u + i / 4u)];
        s0 += dot4I8Packed(lo, y0[i % 4u]);
        s1 += dot4I8Packed(w[9u + i], y1[i % 4u]);
      }
      acc[r] += unpack2x16float(w[0]).x * e0.x * f32(s0) + unpack2x16float(w[8]).y * e1.x * f32(s1);
    }
  }
  for (var r = 0u; r < 2u; r++) {
    let t = subgroupAdd(acc[r]);
    if (lane == 0u) { out[row0 + r] = t; }
  }
}`

/**
 * the latency-bound kernel: LAT_GROUPS workgroups of 128 threads, each a chain of CHAIN dependent loads
 * from a table in L2; with `G` > 0, G more workgroups of 256 threads that read the weights (vec4 at a time)
 */
const lat = (G: number) => `
@group(0) @binding(0) var<storage, read> t: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  if (wid.x >= ${LAT_GROUPS}u) {
    // 128 threads here too: each reads 16 bytes four times a turn, the workgroups striding over a
    var acc = vec4<u32>(0u);
    let n = ${Math.max(G, 1)}u * 128u;
    var i = (wid.x - ${LAT_GROUPS}u) * 128u + lid;
    let total = ${words / 4}u;
    for (; i + 3u * n < total; i += 4u * n) { acc ^= a[i] ^ a[i + n] ^ a[i + 2u * n] ^ a[i + 3u * n]; }
    for (; i < total; i += n) { acc ^= a[i]; }
    if (acc.x == 12345u && acc.y == 54321u) { out[lid] = f32(acc.z); }
    return;
  }
  var j = (wid.x * 128u + lid) * 97u % ${TABLE}u;
  for (var s = 0u; s < ${CHAIN}u; s++) { j = t[j]; }
  if (j == 0xffffffffu) { out[lid] = 1.0; }
}`

const main = async () => {
  const { adapter, device, storage, timePasses, upload } = await rawDevice(["subgroups"])
  console.log(adapter.info.description, `M ${M} K ${K} chain ${CHAIN}`)
  let s = 7
  const rnd = () => (s = (s * 1103515245 + 12345) >>> 0)
  const host = new Uint32Array(words).map(() => rnd() & 0x3bff3bff)
  const copies = Array.from({ length: COPIES }, () => upload(host))
  const table = upload(new Uint32Array(TABLE).map(() => rnd() % TABLE))
  const b8 = upload(new Uint32Array(K / 4).map(() => rnd()))
  const bd = upload(new Float32Array(K / 16).map(() => 0.01))
  const out = device.createBuffer({ size: Math.max(M, 256) * 4, usage: storage })
  const pipe = (code: string) =>
    device.createComputePipeline({
      layout: "auto",
      compute: { module: device.createShaderModule({ code: `enable subgroups;\n${code}` }), entryPoint: "main" }
    })
  const mvPipe = pipe(mv)
  const mvBinds = copies.map((c) =>
    device.createBindGroup({
      layout: mvPipe.getBindGroupLayout(0),
      entries: [c, b8, bd, out].map((buffer, binding) => ({ binding, resource: { buffer } }))
    })
  )
  type Step = (pass: GPUComputePassEncoder, i: number) => void
  /** us per iteration of `steps`, the median of 5 passes after one */
  const time = async (steps: ReadonlyArray<Step>) =>
    (await timePasses((pass) => {
      for (let i = 0; i < ITERS; i++) for (const step of steps) step(pass, i)
    }, 5))[2] / ITERS
  const mvStep = (shift: number): Step => (pass, i) => {
    pass.setPipeline(mvPipe)
    pass.setBindGroup(0, mvBinds[(i + shift) % COPIES])
    pass.dispatchWorkgroups(M / 16)
  }
  const latStep = (G: number): Step => {
    const p = pipe(lat(G))
    const binds = copies.map((c) =>
      device.createBindGroup({
        layout: p.getBindGroupLayout(0),
        entries: [table, c, out].map((buffer, k) => ({ binding: [0, 1, 3][k], resource: { buffer } }))
      })
    )
    return (pass, i) => {
      pass.setPipeline(p)
      pass.setBindGroup(0, binds[i % COPIES])
      pass.dispatchWorkgroups(LAT_GROUPS + G)
    }
  }
  device.addEventListener(
    "uncapturederror",
    (e) => console.log("GPU error", (e as GPUUncapturedErrorEvent).error.message)
  )
  const mvAlone = await time([mvStep(0)])
  const lat0 = latStep(0)
  const latAlone = await time([lat0])
  const cold = await time([lat0, mvStep(0)])
  const mb = (M * rowWords * 4) / 1e6
  console.log(`mv alone ${mvAlone.toFixed(1)} us (${(mb / mvAlone).toFixed(2)} TB/s of ${mb.toFixed(1)} MB)`)
  console.log(`lat alone ${latAlone.toFixed(1)} us; lat then mv (cold) ${cold.toFixed(1)} us`)
  for (const G of [66, 132, 264, 528]) {
    const l = latStep(G)
    const alone = await time([l])
    const warm = await time([l, mvStep(0)])
    // the same reads, but of the copy the next step's product does not read: what the reads cost alone
    const other = await time([l, mvStep(4)])
    console.log(
      `G ${G}: lat+read ${alone.toFixed(1)} us; then mv (warm) ${warm.toFixed(1)} us; then mv of another copy ${
        other.toFixed(1)
      } us; gain ${(cold - warm).toFixed(1)} us a step`
    )
  }
}
main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
