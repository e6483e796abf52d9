/**
 * Kernels that read and write ggml's quantized blocks in place: rows dequantized (get_rows from a
 * quantized table, copies to f32, a product's f16 copy of its weights) and f32 rows quantized into q8_0
 * or q4_0 blocks as ggml's reference quantizer does.
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import { elementwise } from "./elementwise.js"
import type { Kernel, KernelTarget, Operand } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, u32, WG } from "./kernel.js"
import { HALF_QUANTS, pieces } from "./quantizedMatVec.js"
import { RAW_BLOCKS } from "./subgroupMatrix.js"

/** @internal: get_rows from a quantized table: the picked rows dequantized (zeros outside the table) */
export const getRows = (node: Tensor.Tensor, target: KernelTarget): Kernel =>
  elementwise(
    { family: "ew", op: "get_rows_q" },
    [{ name: "a", tensor: node.src[0] }, { name: "x", tensor: node.src[1] }, { name: "d", tensor: node }],
    "d",
    `  let r = u32(ldi_x(ix_x(i1, i2, i3, 0u)));
  if (r >= P.a_ne1) { st_d(ix_d(i0, i1, i2, i3), 0.0); return; }
  st_d(ix_d(i0, i1, i2, i3), ldq_a(ix_a(0u, r, i2, i3), i0));`,
    [],
    target
  )

/** @internal: a quantized tensor copied into f32 */
export const dequantize = (node: Tensor.Tensor, target: KernelTarget): Kernel =>
  elementwise(
    { family: "ew", op: "dequantize" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    "d",
    `  st_d(ix_d(i0, i1, i2, i3), ldq_a(ix_a(0u, i1, i2, i3), i0));`,
    [],
    target
  )

/**
 * vec4s a thread of half_copy's staged forms stores: its run is WG * RAW_VECS / 8 blocks (q4_0 and q8_0
 * take KernelTarget.copyShape's where given)
 */
const RAW_VECS = 4

/** bytes of a k-quant block (256 values, 8 pieces of 32): half_copy stages whole blocks of these */
const K_BLOCKS: Partial<Record<DType.Quantized, number>> = { q4_K: 144, q6_K: 210 }

/**
 * WGSL: fn kq_vec4(b, s, j) -> the 4 values j of piece s of the k-quant block at byte b of the staged run,
 * as the tiles decode them (piece s of a block is its sub-block s; quantizedMatVec.ts's pieces)
 */
const kVec4 = (dtype: DType.Quantized) => {
  const four = (q: string) =>
    `vec4<f32>(f32(${q} & 0xffu), f32((${q} >> 8u) & 0xffu), f32((${q} >> 16u) & 0xffu), f32(${q} >> 24u))`
  return dtype === "q4_K"
    ? `fn kq_vec4(b: u32, s: u32, j: u32) -> vec4<f32> {
  let dm = unpack2x16float(swat(b));
  // ggml's get_scale_min_k4: bytes s and s + 4 below 4, else byte s + 4 with the top bits of s - 4 and s
  let at = (s & 3u) * 8u;
  let x = (swat(b + 4u) >> at) & 0xffu;
  let y = (swat(b + 8u) >> at) & 0xffu;
  let z = (swat(b + 12u) >> at) & 0xffu;
  let sm = select(
    vec2<f32>(f32(x & 63u), f32(y & 63u)),
    vec2<f32>(f32((z & 15u) | ((x >> 6u) << 4u)), f32((z >> 4u) | ((y >> 6u) << 4u))),
    s >= 4u
  );
  let q = (swat(b + 16u + 32u * (s / 2u) + 4u * j) >> (4u * (s & 1u))) & 0x0f0f0f0fu;
  return ${four("q")} * (dm.x * sm.x) - vec4<f32>(dm.y * sm.y);
}`
    : `fn kq_vec4(b: u32, s: u32, j: u32) -> vec4<f32> {
  // half n of the block, quarter t of it: low nibbles or high ones of 32 bytes, 2 high bits a value
  let n = s / 4u;
  let t = s % 4u;
  let l = (swat(b + 64u * n + 32u * (t & 1u) + 4u * j) >> (4u * (t >> 1u))) & 0x0f0f0f0fu;
  let h = ((swat(b + 128u + 32u * n + 4u * j) >> (2u * t)) & 0x03030303u) << 4u;
  let q = l | h;
  let sc = f32(extractBits(bitcast<i32>(swat(b + 192u + 8u * n + 2u * t)), 8u * (j / 4u), 8u));
  let d = unpack2x16float(swat(b + 208u)).x;
  return (d * sc) * (${four("q")} - vec4<f32>(32.0));
}`
}

/**
 * @internal: quantized weights `a` dequantized into `copy` (f16, contiguous, a's shape; an operand bound
 * in a product's scratch), rounded to f16 as the tiles that dequantize while they stage round them. A
 * workgroup takes a run of one row, so that where the row is (the divisions by a's extents) is the same for
 * all its threads and reckoned from the workgroup alone; a contiguous a is one row (a weight matrix's rows
 * shorter than a run leave no thread idle). q4_0, q8_0, q4_K and q6_K: the run's bytes are loaded into
 * workgroup memory a word a thread (each word read once, in order; q4_0 and q8_0 a thread's words all
 * loaded before it stores the first, so that its loads are in flight together), then each thread decodes vec4s of the
 * run's blocks from there, the workgroup's stores one contiguous run each; other types: a thread a
 * 32-value piece, 256 pieces a workgroup. Stored as vec4 where the offsets allow a vec4 binding (a's at 16
 * bytes), else one value at a time. A contiguous a's binding may reach past it (its `extent`, whole times
 * its bytes): the rows after it are copied too (a gated product's up weights after its gate's).
 */
export const halfCopy = (
  source: Operand,
  copy: Operand,
  target: KernelTarget,
  vec = true,
  loads: "words" | "vec4" | "ahead" = target.copyLoads ?? "ahead",
  wideStores = target.copyShape?.stores === "wide"
): Kernel => {
  const size = WG
  const a = source.tensor
  const dtype = a.dtype as DType.Quantized
  // how many times a's bytes the binding covers (whole, and only where a is contiguous: one run of rows)
  const span = (source.extent ?? Tensor.nbytes(a)) / Tensor.nbytes(a)
  if (!Number.isInteger(span) || (span > 1 && !Tensor.isContiguous(a))) {
    throw new Error(`a copy of ${span} times a tensor's bytes needs a contiguous tensor`)
  }
  const raw = RAW_BLOCKS[dtype]
  // k-quants stage runs of whole blocks too (a word a thread), each thread then decoding vec4s of them
  const kq = raw === undefined ? K_BLOCKS[dtype] : undefined
  const staged = raw !== undefined || kq !== undefined
  // the vec4 form stages the run 16 bytes a load, every load of a thread issued before its first store
  // (its reads then in flight together, not one awaited before the next); needs a's binding at 16 bytes
  const wide = raw !== undefined && vec && loads === "vec4"
  // vec4s a thread decodes (halved while the staged run would pass the device's workgroup memory), and
  // pieces (blocks of 32 values) a workgroup takes
  const asked = raw !== undefined ? target.copyShape?.vecs ?? RAW_VECS : RAW_VECS
  const fits = (v: number) =>
    raw === undefined || 4 * Math.ceil((18 + (size * v / 8) * raw.bytes) / 16) * 4 <= (target.workgroupStorage ?? 16384)
  const vecs = [asked, asked / 2, asked / 4].find((v) => v <= RAW_VECS || fits(v)) ?? RAW_VECS
  const run = staged ? (size * vecs) / 8 : size
  // q4_0 and q8_0: a thread's vec4s decoded in pairs and stored 16 bytes a store (8 f16)
  const pairStores = raw !== undefined && vec && wideStores
  // pieces a row, and rows, as the kernel sees them
  const [per, rows] = Tensor.isContiguous(a)
    ? [(span * Tensor.nelements(a)) / 32, 1]
    : [a.ne[0] / 32, a.ne[1] * a.ne[2] * a.ne[3]]
  const runs = Math.ceil(per / run) * rows
  const put = (at: string, v: string) =>
    vec ? `st4_d(${at}, ${v});` : `{ let x = ${v}; for (var i = 0u; i < 4u; i++) { st_d(4u * (${at}) + i, x[i]); } }`
  // the run's words, one more for a run that starts at a 2-byte boundary (blocks of 18 and 34 bytes); in
  // the vec4 form its vec4s from the 16-byte boundary at or before its start, and each thread's share
  const words = raw !== undefined
    ? Math.ceil((2 + run * raw.bytes) / 4)
    : kq !== undefined
    ? Math.ceil((2 + (run / 8) * kq) / 4)
    : 0
  const vec4s = raw === undefined ? 0 : Math.ceil((14 + run * raw.bytes) / 16)
  const perThread = Math.ceil(vec4s / size)
  const wordsEach = Math.ceil(words / size)
  const stage = wide
    ? `  let start = row + p0 * ${raw!.bytes}u;
  let blocks = min(${run}u, per - p0);
  let first = start >> 4u;
  let shift = start & 15u;
  let count = (shift + blocks * ${raw!.bytes}u + 15u) / 16u;
  // loads at clamped indices (a thread past the run reads its last vec4 again), then the stores
${range(perThread).map((e) => `  let x${e} = qv_a(first + min(lid + ${e * size}u, count - 1u));`).join("\n")}
${
      range(perThread).map((e) =>
        `  if (lid + ${e * size}u < count) { let i = 4u * (lid + ${
          e * size
        }u); S[i] = x${e}.x; S[i + 1u] = x${e}.y; S[i + 2u] = x${e}.z; S[i + 3u] = x${e}.w; }`
      ).join("\n")
    }`
    : kq !== undefined
    ? `  let start = row + (p0 / 8u) * ${kq}u;
  let blocks = min(${run}u, per - p0);
  let shift = start & 2u;
  let count = (shift + (blocks / 8u) * ${kq}u + 3u) / 4u;
  for (var i = lid; i < count; i += ${size}u) { S[i] = qwi_a((start >> 2u) + i); }`
    : loads === "ahead"
    ? `  let start = row + p0 * ${raw?.bytes}u;
  let blocks = min(${run}u, per - p0);
  let shift = start & 2u;
  let count = (shift + blocks * ${raw?.bytes}u + 3u) / 4u;
  // loads at clamped indices (a thread past the run reads its last word again), then the stores
${range(wordsEach).map((e) => `  let x${e} = qwi_a((start >> 2u) + min(lid + ${e * size}u, count - 1u));`).join("\n")}
${range(wordsEach).map((e) => `  if (lid + ${e * size}u < count) { S[lid + ${e * size}u] = x${e}; }`).join("\n")}`
    : `  let start = row + p0 * ${raw?.bytes}u;
  let blocks = min(${run}u, per - p0);
  let shift = start & 2u;
  let count = (shift + blocks * ${raw?.bytes}u + 3u) / 4u;
  for (var i = lid; i < count; i += ${size}u) { S[i] = qwi_a((start >> 2u) + i); }`
  const decode = kq !== undefined
    ? `${stage}
  workgroupBarrier();
  let o = P.d_o + (r * per + p0) * 32u;
  for (var e = 0u; e < ${RAW_VECS}u; e++) {
    let k = lid + e * ${size}u;
    let piece = k / 8u;
    if (piece < blocks) {
      ${put("(o >> 2u) + k", `kq_vec4((piece / 8u) * ${kq}u + shift, piece % 8u, k % 8u)`)}
    }
  }`
    : raw === undefined
    ? `  let p = p0 + lid;
  if (p >= per) { return; }
  let o = P.d_o + (r * per + p) * 32u;
  let v = piece(row, p);
${range(8).map((i) => `  ${put(`(o >> 2u) + ${i}u`, `v[${i}]`)}`).join("\n")}`
    : pairStores
    ? `${stage}
  workgroupBarrier();
  let o = P.d_o + (r * per + p0) * 32u;
  for (var e = 0u; e < ${vecs / 2}u; e++) {
    // eight values k of the run: vec4s j and j + 1 of its block
    let k = lid + e * ${size}u;
    let j = 2u * (k % 4u);
    let b = (k / 4u) * ${raw.bytes}u + shift;
    if (k / 4u < blocks) {
      let d = bitcast<vec2<f16>>(swat(b)).x;
      let lo = ${raw.half4Of("d", `swat(b + 2u + 4u * ${raw.wordOf("j")})`, "j")};
      let hi = ${raw.half4Of("d", `swat(b + 2u + 4u * ${raw.wordOf("(j + 1u)")})`, "(j + 1u)")};
      stw_d((o >> 3u) + k, vec4<u32>(bitcast<vec2<u32>>(lo), bitcast<vec2<u32>>(hi)));
    }
  }`
    : `${stage}
  workgroupBarrier();
  let o = P.d_o + (r * per + p0) * 32u;
  for (var e = 0u; e < ${vecs}u; e++) {
    let k = lid + e * ${size}u;
    let j = k % 8u;
    let b = (k / 8u) * ${raw.bytes}u + shift;
    if (k / 8u < blocks) {
      let d = bitcast<vec2<f16>>(swat(b)).x;
      let q = swat(b + 2u + 4u * ${raw.wordOf("j")});
      ${put("(o >> 2u) + k", `vec4<f32>(${raw.half4Of("d", "q", "j")})`)}
    }
  }`
  const kernel = KernelSpec.make({
    variant: {
      family: "half_copy",
      dtype,
      vec,
      lanes: staged,
      ...(wide || (loads === "ahead" && raw !== undefined) ? { loads } : {}),
      ...(vecs !== RAW_VECS ? { vecs } : {}),
      ...(pairStores ? { stores: "wide" } : {})
    },
    operands: [{ ...source, name: "a" }, { ...copy, name: "d" }],
    params: [u32("per", per), u32("rows", rows)],
    workgroups: fold(runs, target.maxWorkgroups),
    main: `
${pieces(dtype)}
${raw !== undefined ? HALF_QUANTS : ""}
${
      !staged ? "" : `var<workgroup> S: array<u32, ${wide ? 4 * vec4s : words}>;
// the 4 bytes at an even byte o of the staged run
fn swat(o: u32) -> u32 {
  let w = o >> 2u;
  return select(S[w], (S[w] >> 16u) | (S[w + 1u] << 16u), (o & 2u) != 0u);
}
${kq !== undefined ? kVec4(dtype) : ""}`
    }
${entry(size)}
  let per = P.per;
  let runs = (per + ${run - 1}u) / ${run}u;
  let w = wg_linear(wid, nwg);
  // the workgroup's row (over a's batches) and its first piece: the same for all its threads
  let r = w / runs;
  if (r >= P.rows) { return; }
  let p0 = (w % runs) * ${run}u;
  let row = ix_a(0u, r % P.a_ne1, (r / P.a_ne1) % P.a_ne2, r / (P.a_ne1 * P.a_ne2));
${decode}
}`
  })
  // vec4 bindings need their offsets aligned (the program checks): 16-byte stores fall back to 8-byte ones,
  // the vec4 form to a's words read one at a time, that to the copy stored a value at a time
  if (pairStores) {
    return {
      ...kernel,
      vec4: true,
      wide: true,
      ...(wide ? {} : { scalar: ["a"] }),
      fallback: halfCopy(source, copy, target, true, loads, false)
    }
  }
  if (wide) return { ...kernel, vec4: true, fallback: halfCopy(source, copy, target, true, "ahead", wideStores) }
  return vec
    ? { ...kernel, vec4: true, scalar: ["a"], fallback: halfCopy(source, copy, target, false, loads) }
    : kernel
}

/** WGSL: the bytes of one block of values x (32 f32) appended to the words `w` from byte `at` */
const blockCode = (type: "q8_0" | "q4_0") =>
  type === "q8_0"
    ? `  var amax = 0.0;
  for (var j = 0u; j < 32u; j++) { amax = max(amax, abs(x[j])); }
  let d = amax / 127.0;
  let id = select(0.0, 1.0 / d, d != 0.0);
  put16(at, pack2x16float(vec2<f32>(d, 0.0)) & 0xffffu);
  for (var j = 0u; j < 32u; j++) {
    // roundf: half away from zero
    let v = x[j] * id;
    let q = i32(sign(v) * floor(abs(v) + 0.5));
    put8(at + 2u + j, u32(q) & 0xffu);
  }`
    : `  var amax = 0.0;
  var mx = 0.0;
  for (var j = 0u; j < 32u; j++) { if (amax < abs(x[j])) { amax = abs(x[j]); mx = x[j]; } }
  let d = mx / -8.0;
  let id = select(0.0, 1.0 / d, d != 0.0);
  put16(at, pack2x16float(vec2<f32>(d, 0.0)) & 0xffffu);
  for (var j = 0u; j < 16u; j++) {
    let lo = min(15u, u32(i32(x[j] * id + 8.5)));
    let hi = min(15u, u32(i32(x[j + 16u] * id + 8.5)));
    put8(at + 2u + j, lo | (hi << 4u));
  }`

/**
 * @internal: f32 rows quantized into q8_0 or q4_0 blocks. A thread writes two consecutive blocks (68 or
 * 36 bytes: whole words, so no two threads share one); a last odd block keeps the bytes after it
 */
export const quantize = (node: Tensor.Tensor, target: KernelTarget): Kernel => {
  const type = node.dtype as "q8_0" | "q4_0"
  const bytes = type === "q8_0" ? 34 : 18
  const blocks = Tensor.nelements(node) / 32
  const pairs = Math.ceil(blocks / 2)
  const words = bytes / 2
  return KernelSpec.make({
    variant: { family: "quantize", type },
    operands: [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    params: [u32("blocks", blocks), u32("per_row", node.ne[0] / 32)],
    workgroups: fold(Math.ceil(pairs / WG), target.maxWorkgroups),
    main: `
var<private> w: array<u32, ${words}>;
fn put8(i: u32, v: u32) { w[i / 4u] |= v << ((i % 4u) * 8u); }
fn put16(i: u32, v: u32) { put8(i, v & 0xffu); put8(i + 1u, v >> 8u); }
${entry()}
  let pair = wg_linear(wid, nwg) * ${WG}u + lid;
  let first = 2u * pair;
  if (first >= P.blocks) { return; }
  let count = min(2u, P.blocks - first);
  for (var bb = 0u; bb < count; bb++) {
    let b = first + bb;
    let row = b / P.per_row;
    let i1 = row % P.a_ne1;
    let i2 = (row / P.a_ne1) % P.a_ne2;
    let i3 = row / (P.a_ne1 * P.a_ne2);
    let i0 = (b % P.per_row) * 32u;
    var x: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) { x[j] = ld_a(ix_a(i0 + j, i1, i2, i3)); }
    let at = bb * ${bytes}u;
${blockCode(type)}
  }
  let base = P.d_o + first * ${bytes}u;
  let full = (count * ${bytes}u) / 4u;
  for (var k = 0u; k < full; k++) { qput_d(base + 4u * k, w[k]); }
  if (count == 1u) {
    // one block of ${bytes} bytes ends mid-word: keep the word's other half
    let last = base + 4u * full;
    qput_d(last, (qw_d(last) & 0xffff0000u) | (w[full] & 0xffffu));
  }
}`
  })
}

/** @internal: whether a copy from `from` to `to` quantizes on this backend */
export const quantizes = (from: DType.DType, to: DType.DType): boolean =>
  from === "f32" && (to === "q8_0" || to === "q4_0")
