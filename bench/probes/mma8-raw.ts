/**
 * Issue 18's int8 prefill question on raw Dawn: a prompt's product on the int8 subgroup matrices (i8 x i8 ->
 * i32, 16 x 16 x 32, offered without unsafe toggles) against the same kernel on f16 ones. As llama.cpp's MMQ,
 * the weights are q8_0 (int8 values, a scale a block of 32) and the activations rounded to q8 blocks; each
 * block's i32 sums must then be scaled by its weight row's and activation column's scales before they add
 * up, and WGSL keeps a subgroup matrix's elements opaque, so each block's results go through workgroup
 * memory to the lanes' f32 sums. The f16 kernel has the same tiles (64 x 64 a workgroup of 4 subgroups, 32 x
 * 32 a subgroup, K staged 32 at a time) with its sums left in the matrices. Planes of int8 values and f32
 * scales (not ggml's 34-byte blocks: the staging's cost left out, in the int8 form's favour); the activations'
 * rounding (a kernel of its own) not timed. GPU time per dispatch over 20 dispatches, each result checked
 * against the host at sampled elements. I8UNIT=1|4: the i8 loads' offsets and strides in bytes or in words
 * (both tried by default: the one the adapter reads right is the one that checks).
 *
 *   tsx mma8-raw.ts [M] [N] [K]          (default 14336 512 4096)
 */
import { rawDevice } from "./raw-dawn.js"

const M = Number(process.argv[2] ?? 14336)
const N = Number(process.argv[3] ?? 512)
const K = Number(process.argv[4] ?? 4096)
const DISPATCHES = 20
const T = 64
const KB = K / 32

const f32Bits = new Float32Array(1)
const u32Bits = new Uint32Array(f32Bits.buffer)
const f16 = (x: number) => {
  f32Bits[0] = x
  const u = u32Bits[0]
  const s = (u >> 16) & 0x8000
  const e = ((u >> 23) & 0xff) - 127 + 15
  return e <= 0 ? s : s | (e << 10) | ((u >> 13) & 0x3ff)
}

/** rows x K int8 values and a positive scale a block of 32 */
const operand = (rows: number, seed: number) => {
  let s = seed
  const rnd = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32
  const q = new Int8Array(rows * K).map(() => Math.floor(rnd() * 255) - 127)
  const d = new Float32Array(rows * KB).map(() => 0.001 + rnd() * 0.01)
  const half = new Uint16Array(rows * K).map((_, i) => f16(q[i] * d[Math.floor(i / 32)]))
  return { q, d, half }
}

const header = `enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);`

/** the int8 kernel: i32 block sums into workgroup memory, scaled into each lane's f32 sums; `u` bytes an offset unit */
const int8Kernel = (u: number) =>
  `${header}
@group(0) @binding(0) var<storage, read> aq: array<vec4<i32>>;
@group(0) @binding(1) var<storage, read> ad: array<f32>;
@group(0) @binding(2) var<storage, read> bq: array<vec4<i32>>;
@group(0) @binding(3) var<storage, read> bd: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;
var<workgroup> As: array<i32, ${T * 8}>;
var<workgroup> Bs: array<i32, ${T * 8}>;
var<workgroup> Ad: array<f32, ${T}>;
var<workgroup> Bd: array<f32, ${T}>;
var<workgroup> Cs: array<i32, ${4 * 4 * 256}>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
  let sg = lid / 32u;
  let sm = sg % 2u;
  let sn = sg / 2u;
  let m0 = wid.x * ${T}u;
  let n0 = wid.y * ${T}u;
  var acc: array<f32, 32>;
  let r = lid / 2u;
  let h = lid % 2u;
  for (var kb = 0u; kb < ${KB}u; kb++) {
    let av = aq[((m0 + r) * ${K}u + kb * 32u) / 16u + h];
    let bv = bq[((n0 + r) * ${K}u + kb * 32u) / 16u + h];
    for (var w = 0u; w < 4u; w++) {
      As[r * 8u + h * 4u + w] = av[w];
      Bs[r * 8u + h * 4u + w] = bv[w];
    }
    if (lid < ${T}u) { Ad[lid] = ad[(m0 + lid) * ${KB}u + kb]; } else { Bd[lid - ${T}u] = bd[(n0 + lid - ${T}u) * ${KB}u + kb]; }
    workgroupBarrier();
    for (var i = 0u; i < 2u; i++) {
      let x = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&As, (sm * 32u + i * 16u) * ${32 / u}u, ${
    32 / u
  }u);
      for (var j = 0u; j < 2u; j++) {
        let y = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>, col_major>(&Bs, (sn * 32u + j * 16u) * ${
    32 / u
  }u, ${32 / u}u);
        subgroupMatrixStore<row_major>(&Cs, sg * 1024u + (i * 2u + j) * 256u, subgroupMatrixMultiply<i32>(x, y), 16u);
      }
    }
    workgroupBarrier();
    for (var f = 0u; f < 4u; f++) {
      let dn = Bd[sn * 32u + (f % 2u) * 16u + lane % 16u];
      for (var t = 0u; t < 8u; t++) {
        let row = lane / 16u + 2u * t;
        acc[f * 8u + t] += f32(Cs[sg * 1024u + f * 256u + row * 16u + lane % 16u]) * Ad[sm * 32u + (f / 2u) * 16u + row] * dn;
      }
    }
    workgroupBarrier();
  }
  for (var f = 0u; f < 4u; f++) {
    for (var t = 0u; t < 8u; t++) {
      let m = m0 + sm * 32u + (f / 2u) * 16u + lane / 16u + 2u * t;
      let n = n0 + sn * 32u + (f % 2u) * 16u + lane % 16u;
      c[n * ${M}u + m] = acc[f * 8u + t];
    }
  }
}`

/** the f16 kernel: the same tiles, the sums kept in f32 result matrices */
const f16Kernel = `enable f16;
${header}
@group(0) @binding(0) var<storage, read> ah: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> bh: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
var<workgroup> As: array<f16, ${T * 32}>;
var<workgroup> Bs: array<f16, ${T * 32}>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let sg = lid / 32u;
  let sm = sg % 2u;
  let sn = sg / 2u;
  let m0 = wid.x * ${T}u;
  let n0 = wid.y * ${T}u;
  var acc: array<subgroup_matrix_result<f32, 16, 16>, 4>;
  for (var k0 = 0u; k0 < ${K}u; k0 += 32u) {
    for (var s = 0u; s < 2u; s++) {
      let v = lid + s * 128u;
      let r = v / 4u;
      let q = v % 4u;
      let av = ah[((m0 + r) * ${K}u + k0) / 8u + q];
      let bv = bh[((n0 + r) * ${K}u + k0) / 8u + q];
      for (var w = 0u; w < 4u; w++) {
        let a2 = bitcast<vec2<f16>>(av[w]);
        let b2 = bitcast<vec2<f16>>(bv[w]);
        As[r * 32u + q * 8u + 2u * w] = a2.x;
        As[r * 32u + q * 8u + 2u * w + 1u] = a2.y;
        Bs[r * 32u + q * 8u + 2u * w] = b2.x;
        Bs[r * 32u + q * 8u + 2u * w + 1u] = b2.y;
      }
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 32u; kk += 16u) {
      for (var i = 0u; i < 2u; i++) {
        let x = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&As, (sm * 32u + i * 16u) * 32u + kk, 32u);
        for (var j = 0u; j < 2u; j++) {
          let y = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>, col_major>(&Bs, (sn * 32u + j * 16u) * 32u + kk, 32u);
          acc[i * 2u + j] = subgroupMatrixMultiplyAccumulate(x, y, acc[i * 2u + j]);
        }
      }
    }
    workgroupBarrier();
  }
  for (var f = 0u; f < 4u; f++) {
    let m = m0 + sm * 32u + (f / 2u) * 16u;
    let n = n0 + sn * 32u + (f % 2u) * 16u;
    subgroupMatrixStore<col_major>(&c, n * ${M}u + m, acc[f], ${M}u);
  }
}`

const main = async () => {
  const { adapter, device, storage, timeDispatches, upload } = await rawDevice([
    "subgroups",
    "shader-f16",
    "chromium-experimental-subgroup-matrix"
  ])
  device.addEventListener("uncapturederror", (e) => console.error((e as GPUUncapturedErrorEvent).error.message))
  console.log(adapter.info.description, `${M} x ${N} x ${K}`)
  const a = operand(M, 7)
  const b = operand(N, 11)
  const buffers = {
    aq: upload(a.q),
    ad: upload(a.d),
    bq: upload(b.q),
    bd: upload(b.d),
    ah: upload(a.half),
    bh: upload(b.half)
  }
  const out = device.createBuffer({ size: M * N * 4, usage: storage })
  const readBack = device.createBuffer({ size: M * N * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })
  const want = (m: number, n: number) => {
    let t = 0
    for (let kb = 0; kb < KB; kb++) {
      let s = 0
      for (let i = 0; i < 32; i++) s += a.q[m * K + kb * 32 + i] * b.q[n * K + kb * 32 + i]
      t += s * a.d[m * KB + kb] * b.d[n * KB + kb]
    }
    return t
  }
  const run = async (name: string, code: string, bound: ReadonlyArray<GPUBuffer>) => {
    device.pushErrorScope("validation")
    const module = device.createShaderModule({ code })
    const info = await module.getCompilationInfo()
    for (const m of info.messages) {
      if (m.type === "error") console.log(`${name}: ${m.lineNum}:${m.linePos} ${m.message}`)
    }
    const pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } })
    const bind = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [...bound, out].map((buffer, binding) => ({ binding, resource: { buffer } }))
    })
    const error = await device.popErrorScope()
    if (error) return console.log(`${name}: ${error.message}`)
    const us = await timeDispatches(
      pipeline,
      [bind],
      [M / T, N / T],
      DISPATCHES,
      (enc) => enc.copyBufferToBuffer(out, 0, readBack, 0, M * N * 4)
    )
    await readBack.mapAsync(GPUMapMode.READ)
    const got = new Float32Array(readBack.getMappedRange().slice(0))
    readBack.unmap()
    let num = 0
    let den = 0
    for (let s = 0; s < 64; s++) {
      const m = (s * 7919) % M
      const n = (s * 104729) % N
      num += (got[n * M + m] - want(m, n)) ** 2
      den += want(m, n) ** 2
    }
    console.log(
      `${name.padEnd(18)} ${us.toFixed(1).padStart(8)} us  ${(2 * M * N * K / us / 1e6).toFixed(1)} TFLOP/s  nmse ${
        (num / den).toExponential(1)
      }${num / den < 1e-4 ? "" : " WRONG"}`
    )
  }
  await run("f16", f16Kernel, [buffers.ah, buffers.bh])
  for (const u of (process.env.I8UNIT ?? "1,4").split(",").map(Number)) {
    await run(`int8 (unit ${u})`, int8Kernel(u), [buffers.aq, buffers.ad, buffers.bq, buffers.bd])
  }
}
main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
