/**
 * Quantized matrix-vector designs on raw Dawn, by GPU time over rotating weight copies (L2 cold, as in
 * decoding): a plain read of the bytes (the ceiling Dawn reaches), and int8 dot products of a's blocks
 * with b quantized to q8 (as llama.cpp's MMVQ), a lane per pair of blocks, or with `QUADS=1` the lanes
 * across a block's words (which lost: benchmarks/RESULTS.md, run dg). A measuring aid that chose the
 * kernel in packages/webgpu's int8MatVec.ts (it keeps its own copy of the designs' WGSL, to measure
 * them apart from the project's kernel machinery); it checks each result against a host dot product.
 *
 *   tsx mvq-raw.ts [M] [K]          (TYPES=q4_0,q8_0; QUADS=1; STAGED=1; FOOTPRINT=1 for the read windows)
 */
import { rawDevice } from "./raw-dawn.js"

const M = Number(process.argv[2] ?? 14336)
const K = Number(process.argv[3] ?? 4096)
const COPIES = 8
const DISPATCHES = 48

type Design = { readonly name: string; readonly wgsl: string; readonly rows: number; readonly bytes: number }

const f16 = (x: number) => {
  const f = new Float32Array([x])
  const u = new Uint32Array(f.buffer)[0]
  const s = (u >> 16) & 0x8000
  const e = ((u >> 23) & 0xff) - 127 + 15
  const m = (u >> 13) & 0x3ff
  return e <= 0 ? s : s | (e << 10) | m
}
const half = (h: number) => {
  const e = (h >> 10) & 31
  const m = h & 1023
  const v = e === 0 ? m / 1024 * 2 ** -14 : (1 + m / 1024) * 2 ** (e - 15)
  return h & 0x8000 ? -v : v
}

/** q4_0 (18-byte blocks) or q8_0 (34) rows of random values, and the host's dequantized row sums */
const makeWeights = (type: "q4_0" | "q8_0", seed: number) => {
  const bs = type === "q4_0" ? 18 : 34
  const bytes = new Uint8Array(M * (K / 32) * bs)
  let s = seed
  const rnd = () => (s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32
  for (let b = 0; b < M * K / 32; b++) {
    const o = b * bs
    const d = f16(0.001 + rnd() * 0.01)
    bytes[o] = d & 255
    bytes[o + 1] = d >> 8
    for (let i = 2; i < bs; i++) bytes[o + i] = Math.floor(rnd() * 256)
  }
  return bytes
}
const dequantRowDot = (type: "q4_0" | "q8_0", bytes: Uint8Array, row: number, b: Float32Array) => {
  const bs = type === "q4_0" ? 18 : 34
  let t = 0
  for (let j = 0; j < K / 32; j++) {
    const o = (row * K / 32 + j) * bs
    const d = half(bytes[o] | (bytes[o + 1] << 8))
    for (let i = 0; i < 32; i++) {
      const q = type === "q4_0"
        ? ((i < 16 ? bytes[o + 2 + i] & 15 : bytes[o + 2 + i - 16] >> 4) - 8)
        : ((bytes[o + 2 + i] << 24) >> 24)
      t += d * q * b[j * 32 + i]
    }
  }
  return t
}

const quantizeB = `
@group(0) @binding(0) var<storage, read> b: array<f32>;
@group(0) @binding(1) var<storage, read_write> b8: array<u32>;
@group(0) @binding(2) var<storage, read_write> bd: array<vec2<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let blk = gid.x;
  if (blk >= ${K / 32}u) { return; }
  var amax = 0.0;
  for (var i = 0u; i < 32u; i++) { amax = max(amax, abs(b[blk * 32u + i])); }
  let d = amax / 127.0;
  let id = select(0.0, 1.0 / d, d > 0.0);
  var sum = 0i;
  for (var w = 0u; w < 8u; w++) {
    var q = vec4<i32>(0);
    for (var k = 0u; k < 4u; k++) {
      let x = b[blk * 32u + 4u * w + k] * id;
      q[k] = i32(trunc(x + select(-0.5, 0.5, x >= 0.0)));
    }
    sum += q.x + q.y + q.z + q.w;
    b8[blk * 8u + w] = pack4xI8(q);
  }
  bd[blk] = vec2<f32>(d, d * f32(sum));
}`

/** a plain read of every byte of a, vec4 at a time, a workgroup's sum written (Dawn's ceiling) */
const bandwidth = (words: number): Design => ({
  name: "read",
  rows: 1,
  bytes: 0,
  wgsl: `
@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> b8: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bd: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  var acc = vec4<u32>(0u);
  let n = nwg.x * 256u;
  var i = gid.x;
  for (; i + 3u * n < ${words / 4}u; i += 4u * n) { acc ^= a[i] ^ a[i + n] ^ a[i + 2u * n] ^ a[i + 3u * n]; }
  for (; i < ${words / 4}u; i += n) { acc ^= a[i]; }
  if (acc.x == 12345u) { out[gid.x] = f32(acc.y + acc.z + acc.w); }
}`
})

/**
 * WGSL: b rounded to q8_0 blocks by the workgroup (`threads` of them), each block's int8 words `w` stored
 * by `store` and its scale and scaled sum into es
 */
const roundB = (threads: number, store: string) =>
  `  for (var blk = lid; blk < ${K / 32}u; blk += ${threads}u) {
    var x: array<vec4<f32>, 8>;
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
      x[i] = bf[blk * 8u + i];
      let m = abs(x[i]);
      amax = max(amax, max(max(m.x, m.y), max(m.z, m.w)));
    }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d > 0.0);
    var sum = 0i;
    var w: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
      let v = x[i] * id;
      let q = vec4<i32>(trunc(v + select(vec4<f32>(-0.5), vec4<f32>(0.5), v >= vec4<f32>(0.0))));
      sum += q.x + q.y + q.z + q.w;
      w[i] = pack4xI8(q);
    }
${store}
    es[blk] = vec2<f32>(d, d * f32(sum));
  }
  workgroupBarrier();`

/** WGSL: each subgroup's R row sums (acc) written out, by subgroup sums where subgroups are 32 lanes */
const writeRows = (R: number, sg32: boolean) =>
  sg32
    ? `  for (var r = 0u; r < ${R}u; r++) {
    let t = subgroupAdd(acc[r]);
    if (lane == 0u && row0 + r < ${M}u) { out[row0 + r] = t; }
  }`
    : `  for (var r = 0u; r < ${R}u; r++) { part[(warp * ${R}u + r) * 32u + lane] = acc[r]; }
  workgroupBarrier();
  if (lane < ${R}u && row0 + lane < ${M}u) {
    var t = 0.0;
    for (var i = 0u; i < 32u; i++) { t += part[(warp * ${R}u + lane) * 32u + i]; }
    out[row0 + lane] = t;
  }`

/**
 * int8 dots, a lane per pair of blocks (a pair is whole words: q4_0 36 bytes = 9 words, q8_0 68 = 17),
 * `warps` subgroups of 32 per workgroup, `R` rows per subgroup
 */
const pairs = (type: "q4_0" | "q8_0", warps: number, R: number, sg32: boolean, staged = false, wq = false): Design => {
  const pw = type === "q4_0" ? 9 : 17
  const rowWords = (K / 64) * pw
  const blockDot = type === "q4_0"
    ? `
  let q0 = array<u32, 4>((w[0] >> 16u) | (w[1] << 16u), (w[1] >> 16u) | (w[2] << 16u), (w[2] >> 16u) | (w[3] << 16u), (w[3] >> 16u) | (w[4] << 16u));
  let d0 = unpack2x16float(w[0]).x;
  let d1 = unpack2x16float(w[4]).y;
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 4u; i++) {
    s0 += dot4I8Packed(q0[i] & 0x0f0f0f0fu, y[i]) + dot4I8Packed((q0[i] >> 4u) & 0x0f0f0f0fu, y[4u + i]);
    s1 += dot4I8Packed(w[5u + i] & 0x0f0f0f0fu, y[8u + i]) + dot4I8Packed((w[5u + i] >> 4u) & 0x0f0f0f0fu, y[12u + i]);
  }
  acc[r] += d0 * (e0.x * f32(s0) - 8.0 * e0.y) + d1 * (e1.x * f32(s1) - 8.0 * e1.y);`
    : `
  let d0 = unpack2x16float(w[0]).x;
  let d1 = unpack2x16float(w[8]).y;
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 8u; i++) {
    s0 += dot4I8Packed((w[i] >> 16u) | (w[i + 1u] << 16u), y[i]);
    s1 += dot4I8Packed(w[9u + i], y[8u + i]);
  }
  acc[r] += d0 * e0.x * f32(s0) + d1 * e1.x * f32(s1);`
  return {
    name: `${type} ${staged ? "staged" : wq ? "pairs-wq" : "pairs"} w${warps} r${R}`,
    rows: warps * R,
    bytes: (staged ? warps * R * 32 * pw * 4 : 0) + warps * R * 32 * 4,
    wgsl: `
@group(0) @binding(0) var<storage, read> a: array<u32>;
${
      wq
        ? `@group(0) @binding(1) var<storage, read> bf: array<vec4<f32>>;
var<workgroup> ys: array<vec4<u32>, ${K / 16}>;
var<workgroup> es: array<vec2<f32>, ${K / 32}>;`
        : `@group(0) @binding(1) var<storage, read> b8: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bd: array<vec2<f32>>;`
    }
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
var<workgroup> part: array<f32, ${32 * warps * R}>;
var<workgroup> tile: array<u32, ${warps * R * 32 * pw}>;
@compute @workgroup_size(${32 * warps})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let warp = lid / 32u;
  let lane = lid % 32u;
  let row0 = (wid.x * ${warps}u + warp) * ${R}u;
  var acc: array<f32, ${R}>;
${
      wq
        ? `  // b quantized to q8 blocks by the workgroup: vec4 k of pair p at k * pairs + p (lanes read consecutive vec4)
${
          roundB(
            32 * warps,
            `    let p = blk / 2u;
    let h = (blk % 2u) * 2u;
    ys[h * ${K / 64}u + p] = vec4<u32>(w[0], w[1], w[2], w[3]);
    ys[(h + 1u) * ${K / 64}u + p] = vec4<u32>(w[4], w[5], w[6], w[7]);`
          )
        }`
        : ""
    }
  for (var p0 = 0u; p0 < ${K / 64}u; p0 += 32u) {
    let p = p0 + lane;
${
      staged
        ? `    workgroupBarrier();
    for (var r = 0u; r < ${R}u; r++) {
      let base = min(row0 + r, ${M - 1}u) * ${rowWords}u + p0 * ${pw}u;
      for (var i = 0u; i < ${pw}u; i++) {
        let k = lane + 32u * i;
        tile[(warp * ${R}u + r) * ${32 * pw}u + k] = select(0u, a[base + k], p0 * ${pw}u + k < ${rowWords}u);
      }
    }
    workgroupBarrier();`
        : ""
    }
    if (p < ${K / 64}u) {
    let v = p * 4u;
    let y = array<u32, 16>(${
      [0, 1, 2, 3].map((j) => {
        const at = wq ? `ys[${j}u * ${K / 64}u + p]` : `b8[v + ${j}u]`
        return `${at}.x, ${at}.y, ${at}.z, ${at}.w`
      }).join(", ")
    });
    let e0 = ${wq ? "es" : "bd"}[2u * p];
    let e1 = ${wq ? "es" : "bd"}[2u * p + 1u];
    for (var r = 0u; r < ${R}u; r++) {
      let o = min(row0 + r, ${M - 1}u) * ${rowWords}u + p * ${pw}u;
      var w: array<u32, ${pw}>;
      for (var k = 0u; k < ${pw}u; k++) { w[k] = ${
      staged ? `tile[(warp * ${R}u + r) * ${32 * pw}u + lane * ${pw}u + k]` : "a[o + k]"
    }; }
      ${blockDot}
    }
    }
  }
${writeRows(R, sg32)}
}`
  }
}

/**
 * int8 dots with the lanes across a block's words (as llama.cpp's CUDA MMVQ): q4_0 4 lanes a block (8
 * blocks a subgroup step), q8_0 8 (4 blocks): a load instruction's 32 lanes read 144 or 136 neighbouring
 * bytes, where a lane per pair spreads them over 1152 or 2176. `U` steps a turn (their loads issued
 * together); `wq`: b rounded to q8_0 in each workgroup's memory, else read pre-quantized
 */
const quads = (type: "q4_0" | "q8_0", warps: number, R: number, U: number, wq: boolean, sg32: boolean): Design => {
  const LPB = type === "q4_0" ? 4 : 8
  const BPI = 32 / LPB
  const BS = type === "q4_0" ? 18 : 34
  const NB = K / 32
  const rowBytes = NB * BS
  const bw = (at: string) => wq ? `ys[${at}]` : `b8[${at}]`
  const be = (at: string) => wq ? `es[${at}]` : `bd[${at}]`
  const step = (u: number) => `
    {
      let blk = blk0 + ${u * BPI}u + bi;
      let e = ${be("blk")};
      ${
    type === "q4_0" ?
      `let bl = ${bw("blk * 8u + sub")};
      let bh = ${bw("blk * 8u + 4u + sub")};` :
      `let bv = ${bw("blk * 8u + sub")};`
  }
      for (var r = 0u; r < ${R}u; r++) {
        let o = min(row0 + r, ${M - 1}u) * ${rowBytes}u + blk * ${BS}u;
        let d = unpack2x16float(wat(o)).x;
        let q = wat(o + 2u + 4u * sub);
        ${
    type === "q4_0"
      ? `let lo = (((q & 0x0f0f0f0fu) | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
        let hi = ((((q >> 4u) & 0x0f0f0f0fu) | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
        acc[r] += d * e.x * f32(dot4I8Packed(lo, bl) + dot4I8Packed(hi, bh));`
      : `acc[r] += d * e.x * f32(dot4I8Packed(q, bv));`
  }
      }
    }`
  return {
    name: `${type} quads${wq ? "-wq" : ""} w${warps} r${R} u${U}`,
    rows: warps * R,
    bytes: 0,
    wgsl: `
@group(0) @binding(0) var<storage, read> a: array<u32>;
${
      wq
        ? `@group(0) @binding(1) var<storage, read> bf: array<vec4<f32>>;
var<workgroup> ys: array<u32, ${K / 4}>;
var<workgroup> es: array<vec2<f32>, ${NB}>;`
        : `@group(0) @binding(1) var<storage, read> b8: array<u32>;
@group(0) @binding(2) var<storage, read> bd: array<vec2<f32>>;`
    }
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
var<workgroup> part: array<f32, ${32 * warps * R}>;
fn wat(o: u32) -> u32 {
  let w = o >> 2u;
  let lo = a[w];
  return select(lo, (lo >> 16u) | (a[w + 1u] << 16u), (o & 2u) != 0u);
}
@compute @workgroup_size(${32 * warps})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let warp = lid / 32u;
  let lane = lid % 32u;
  let sub = lane % ${LPB}u;
  let bi = lane / ${LPB}u;
  let row0 = (wid.x * ${warps}u + warp) * ${R}u;
  var acc: array<f32, ${R}>;
${
      wq
        ? roundB(32 * warps, "    for (var i = 0u; i < 8u; i++) { ys[blk * 8u + i] = w[i]; }")
        : ""
    }
  for (var blk0 = 0u; blk0 < ${NB}u; blk0 += ${U * BPI}u) {${Array.from({ length: U }, (_, u) => step(u)).join("")}
  }
${writeRows(R, sg32)}
}`
  }
}

const main = async () => {
  const { adapter, device, storage, timeDispatches: timed, upload } = await rawDevice(["subgroups"])
  const sg32 = adapter.info.subgroupMinSize === 32 && adapter.info.subgroupMaxSize === 32
  console.log(adapter.info.description, sg32 ? "subgroups of 32" : "reduction in workgroup memory")
  const bHost = new Float32Array(K).map((_, i) => Math.sin(i * 0.37) + 0.3 * Math.cos(i * 1.3))
  const b = upload(bHost)
  const b8 = device.createBuffer({ size: K, usage: storage })
  const bd = device.createBuffer({ size: K / 32 * 8, usage: storage })
  const out = device.createBuffer({ size: M * 4 * 64, usage: storage })
  const readBack = device.createBuffer({ size: M * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })
  const pipe = (code: string) =>
    device.createComputePipeline({
      layout: "auto",
      compute: { module: device.createShaderModule({ code: `enable subgroups;\n${code}` }), entryPoint: "main" }
    })
  /** GPU time per dispatch (us) over `binds`, the first pass also copying the result out for the check */
  const timeDispatches = (pipeline: GPUComputePipeline, binds: ReadonlyArray<GPUBindGroup>, groups: number) =>
    timed(
      pipeline,
      binds,
      [Math.min(groups, 65535), Math.ceil(groups / 65535)],
      DISPATCHES,
      (enc) => enc.copyBufferToBuffer(out, 0, readBack, 0, M * 4)
    )
  const quant = pipe(quantizeB)
  const qEnc = device.createCommandEncoder()
  const qPass = qEnc.beginComputePass()
  qPass.setPipeline(quant)
  qPass.setBindGroup(
    0,
    device.createBindGroup({
      layout: quant.getBindGroupLayout(0),
      entries: [{ binding: 0, resource: { buffer: b } }, { binding: 1, resource: { buffer: b8 } }, {
        binding: 2,
        resource: { buffer: bd }
      }]
    })
  )
  qPass.dispatchWorkgroups(Math.ceil(K / 32 / 64))
  qPass.end()
  device.queue.submit([qEnc.finish()])

  if (process.env.FOOTPRINT) {
    // one big buffer read in windows of S bytes, rotating: does the footprint (page tables) bound a read?
    const total = 1536 * 2 ** 20
    const big = device.createBuffer({ size: total, usage: storage })
    for (const mb of [4, 16, 32, 64, 128, 256]) {
      const S = mb * 2 ** 20
      const design = bandwidth(S / 4)
      const pipeline = pipe(design.wgsl)
      const binds = Array.from({ length: total / S }, (_, i) =>
        device.createBindGroup({
          layout: pipeline.getBindGroupLayout(0),
          entries: [{ binding: 0, resource: { buffer: big, offset: i * S, size: S } }, {
            binding: 3,
            resource: { buffer: out }
          }]
        }))
      for (const span of [binds.length, Math.max(1, Math.floor(binds.length / 4))]) {
        const us = await timeDispatches(pipeline, binds.slice(0, span), 132 * 8)
        console.log(`read ${mb} MB windows over ${span * mb} MB: ${us.toFixed(1)} us ${(S / us / 1e6).toFixed(2)} TB/s`)
      }
    }
    return
  }
  for (const type of (process.env.TYPES ?? "q4_0,q8_0").split(",") as Array<"q4_0" | "q8_0">) {
    const host = makeWeights(type, 7)
    const copies = Array.from({ length: COPIES }, () => upload(host))
    const rowBytes = K / 32 * (type === "q4_0" ? 18 : 34)
    const designs = process.env.QUADS
      ? [
        bandwidth(M * rowBytes / 4),
        pairs(type, 8, 2, sg32, false, true),
        ...[[8, 1, 1], [8, 2, 1], [8, 1, 2], [8, 2, 2], [4, 2, 2], [8, 4, 1], [4, 4, 2]].flatMap(([w, R, U]) => [
          quads(type, w, R, U, false, sg32),
          quads(type, w, R, U, true, sg32)
        ])
      ]
      : [
        bandwidth(M * rowBytes / 4),
        ...[2, 3, 4].flatMap((R) => [4, 8].map((w) => pairs(type, w, R, sg32))),
        ...[2, 3, 4].flatMap((R) => [4, 8].map((w) => pairs(type, w, R, sg32, false, true))),
        // a's words staged through workgroup memory by coalesced loads (it lost: run bq)
        ...(process.env.STAGED ? [1, 2].map((R) => pairs(type, 4, R, sg32, true)) : [])
      ]
    for (const design of designs) {
      const pipeline = pipe(design.wgsl)
      const groups = design.name === "read" ? 132 * 8 : Math.ceil(M / design.rows)
      const binds = copies.map((a) =>
        device.createBindGroup({
          layout: pipeline.getBindGroupLayout(0),
          entries: [a, design.name.includes("wq") ? b : b8, bd, out].map((buffer, binding) => ({
            binding,
            resource: { buffer }
          }))
            .filter((e) =>
              design.name.includes("wq")
                ? e.binding !== 2
                : design.name !== "read" || e.binding === 0 || e.binding === 3
            )
        })
      )
      const us = await timeDispatches(pipeline, binds, groups)
      if (design.name !== "read") {
        await readBack.mapAsync(GPUMapMode.READ)
        const got = new Float32Array(readBack.getMappedRange().slice(0))
        readBack.unmap()
        let num = 0
        let den = 0
        for (let r = 0; r < M; r += Math.max(1, Math.floor(M / 97))) {
          const want = dequantRowDot(type, host, r, bHost)
          num += (got[r] - want) ** 2
          den += want ** 2
        }
        if (!(num / den < 1e-3)) console.log(`  ${design.name}: WRONG, nmse ${num / den}`)
      }
      console.log(
        `${type} ${M}x${K} ${design.name.padEnd(22)} ${us.toFixed(1).padStart(6)} us  ${
          (M * rowBytes / us / 1e6).toFixed(2)
        } TB/s`
      )
    }
    for (const c of copies) c.destroy()
  }
}
main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
