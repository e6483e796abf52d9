/**
 * Matrix-vector products over quantized weights (decode: results of up to 8 columns), built to stream
 * the blocks at memory bandwidth. A workgroup is 8 groups of 32 lanes; each group owns RPS rows. K is
 * walked in chunks of 1024: the chunk of b is staged once in workgroup memory (shared by the workgroup's
 * rows), and lane l of a group dequantizes elements 32l..32l+31 of the chunk, one 32-value piece of a
 * block, from whole 32-bit words (coalesced across lanes) into registers and dots them with b. Partial
 * sums meet over subgroups of 32 where the adapter has exactly those, else through workgroup memory.
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as DTypes from "@effect-gpu/core/DType"
import type * as Tensor from "@effect-gpu/core/Tensor"
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, repeat, stridesAligned, SUBGROUP_LANES } from "./kernel.js"
import type { Product } from "./product.js"
import { stackRows, stackWeights } from "./product.js"

/** elements of K per chunk: 32 lanes x one 32-value piece */
const CHUNK = 1024
/** lanes per group, groups per workgroup */
const LANES = 32
const GROUPS = 8

/**
 * bytes of workgroup memory the kernel takes for `N` columns and `stage` chunks of b staged at once: b's
 * chunks and the reduction's scratch
 */
export const sharedBytes = (N: number, stage = 1): number => stage * N * CHUNK * 4 + LANES * GROUPS * 4 * 2

/**
 * @internal: chunks of b staged at once: as many as the workgroup memory holds, up to K (fewer
 * barriers between the lanes' streams of blocks), at most 8
 */
export const stageFor = (N: number, K: number, storage: number): number => {
  let stage = Math.min(8, Math.ceil(K / CHUNK))
  while (stage > 1 && sharedBytes(N, stage) > storage) stage--
  return stage
}

/**
 * WGSL helpers that read a's blocks by words: wat(o) the 4 bytes at an even byte o (blocks of 18, 22, 34
 * and 210 bytes sit at 2-byte boundaries), spanN(o) N such words from o, and the nibble, byte and bit
 * unpackers, each giving four values as a vec4
 */
const readers = (spans: ReadonlyArray<number>, word: string) => `
fn wat(o: u32) -> u32 {
  let w = o >> 2u;
  let lo = ${word}(w);
  return select(lo, (lo >> 16u) | (${word}(w + 1u) << 16u), (o & 2u) != 0u);
}
${
  spans.map((n) =>
    `fn span${n}(o: u32) -> array<u32, ${n}> {
  let w = o >> 2u;
  let odd = (o & 2u) != 0u;
${range(n + 1).map((k) => `  let r${k} = ${word}(w + ${k}u);`).join("\n")}
  return array<u32, ${n}>(${range(n).map((k) => `select(r${k}, (r${k} >> 16u) | (r${k + 1} << 16u), odd)`).join(", ")});
}`
  ).join("\n")
}
fn nib_lo(q: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(q) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(15u)); }
fn nib_hi(q: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(q) >> vec4<u32>(4u, 12u, 20u, 28u)) & vec4<u32>(15u)); }
fn sbytes(q: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(q) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}
fn bits(q: u32, j: u32) -> vec4<f32> {
  return vec4<f32>((vec4<u32>(q) >> (vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u));
}
fn half_lo(w: u32) -> f32 { return unpack2x16float(w).x; }
fn half_hi(w: u32) -> f32 { return unpack2x16float(w).y; }`

/**
 * WGSL: fn piece(row, p) -> array<vec4<f32>, 8>: values 32p..32p+31 of the row starting at byte `row`,
 * dequantized as ggml's tables say (../shared/reference/ggml-next/README.md)
 */
const pieceOf = (dtype: DType.Quantized): { readonly spans: ReadonlyArray<number>; readonly code: string } => {
  const body = (lines: string) =>
    `fn piece(row: u32, p: u32) -> array<vec4<f32>, 8> {\n  var v: array<vec4<f32>, 8>;\n${lines}\n  return v;\n}`
  switch (dtype) {
    case "q8_0":
      return {
        spans: [8],
        code: body(`  let o = row + p * 34u;
  let d = half_lo(wat(o));
  let q = span8(o + 2u);
${range(8).map((i) => `  v[${i}] = d * sbytes(q[${i}]);`).join("\n")}`)
      }
    case "q4_0":
      return {
        spans: [4],
        code: body(`  let o = row + p * 18u;
  let d = half_lo(wat(o));
  let q = span4(o + 2u);
${
          range(4).map((i) => `  v[${i}] = d * (nib_lo(q[${i}]) - 8.0);\n  v[${i + 4}] = d * (nib_hi(q[${i}]) - 8.0);`)
            .join("\n")
        }`)
      }
    case "q4_1":
      return {
        spans: [4],
        code: body(`  let o = row + p * 20u;
  let dm = wat(o);
  let d = half_lo(dm);
  let m = half_hi(dm);
  let q = span4(o + 4u);
${range(4).map((i) => `  v[${i}] = d * nib_lo(q[${i}]) + m;\n  v[${i + 4}] = d * nib_hi(q[${i}]) + m;`).join("\n")}`)
      }
    case "q5_0":
      return {
        spans: [4],
        code: body(`  let o = row + p * 22u;
  let d = half_lo(wat(o));
  let qh = wat(o + 2u);
  let q = span4(o + 6u);
${
          range(4).map((i) =>
            `  v[${i}] = d * (nib_lo(q[${i}]) + 16.0 * bits(qh, ${4 * i}u) - 16.0);\n` +
            `  v[${i + 4}] = d * (nib_hi(q[${i}]) + 16.0 * bits(qh, ${16 + 4 * i}u) - 16.0);`
          ).join("\n")
        }`)
      }
    case "q4_K":
      // piece s of a block is sub-block s: its 6-bit scale and min, and 32 nibbles of chunk s / 2
      return {
        spans: [8],
        code: body(`  let o = row + (p / 8u) * 144u;
  let s = p % 8u;
  let dd = wat(o);
  var S = array<u32, 3>(wat(o + 4u), wat(o + 8u), wat(o + 12u));
  let x = (S[s / 4u] >> (8u * (s % 4u))) & 0xffu;
  let y = (S[(s + 4u) / 4u] >> (8u * (s % 4u))) & 0xffu;
  let z = (S[(s + 4u) % 8u / 4u] >> (8u * (s % 4u))) & 0xffu;
  // s < 4: scale and min from bytes s and s + 4; s >= 4: from byte s + 4 with the top bits of s - 4 and s
  var sc = x & 63u;
  var mn = y & 63u;
  if (s >= 4u) {
    sc = (y & 15u) | ((z >> 6u) << 4u);
    mn = (y >> 4u) | ((x >> 6u) << 4u);
  }
  let scale = half_lo(dd) * f32(sc);
  let minv = half_hi(dd) * f32(mn);
  let q = span8(o + 16u + 32u * (s / 2u));
  let upper = (s & 1u) == 1u;
${range(8).map((i) => `  v[${i}] = scale * select(nib_lo(q[${i}]), nib_hi(q[${i}]), upper) - minv;`).join("\n")}`)
      }
    case "q6_K":
      // piece s of a block: half n = s / 4 and quarter s % 4 of it; a scale per 16 values
      return {
        spans: [8],
        code: body(`  let o = row + (p / 8u) * 210u;
  let s = p % 8u;
  let n = s / 4u;
  let qq = s % 4u;
  let L = span8(o + 64u * n + 32u * (qq & 1u));
  let H = span8(o + 128u + 32u * n);
  let scw = wat(o + 192u + 8u * n + 2u * qq);
  let d = half_lo(wat(o + 208u));
  let s0 = d * f32(bitcast<i32>(scw << 24u) >> 24u);
  let s1 = d * f32(bitcast<i32>(scw << 16u) >> 24u);
  let hs = vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(2u * qq);
${
          range(8).map((i) =>
            `  v[${i}] = ${i < 4 ? "s0" : "s1"} * (select(nib_lo(L[${i}]), nib_hi(L[${i}]), qq >= 2u) + ` +
            `16.0 * vec4<f32>((vec4<u32>(H[${i}]) >> hs) & vec4<u32>(3u)) - 32.0);`
          ).join("\n")
        }`)
      }
  }
}

/**
 * @internal: WGSL that dequantizes 32-value pieces of a's rows: fn piece(row byte, p) ->
 * array<vec4<f32>, 8>, values 32p..32p+31 (for the tiled kernels that stage a's blocks as f16)
 */
export const pieces = (dtype: DType.Quantized, word = "qwi_a"): string => {
  const { code, spans } = pieceOf(dtype)
  return `${readers(spans, word)}
${code}`
}

/**
 * @internal: the quantized matrix-vector kernel for `product` (a quantized, K a multiple of 32), `rps`
 * rows per group of lanes
 */
export const quantizedMatVec = (
  product: Product,
  dtype: DType.Quantized,
  target: KernelTarget,
  rps = 2,
  stage = 1,
  staged = false
): Kernel => {
  const { M, N, batches, bias, epilogue, operands, params } = product
  const WG = LANES * GROUPS
  const rowsPerGroup = GROUPS * rps
  const groups = Math.ceil(M / rowsPerGroup)
  const subgroups = target.subgroups === true && target.subgroupSize === LANES
  // written out only in the staged form: the H200 ran the in-place form's loops faster (38 against 51 us
  // for 14336x4096 q4_0, runs ba and bc)
  const out = staged && target.software !== true
  // the staged form: a's bytes of the chunk for the workgroup's rows, loaded 16 bytes at a time by all
  // lanes together (whole-word block reads from global memory cost a load per 4 bytes), decoded from there
  const rowWords = (stage * CHUNK / DTypes.blockSize(dtype)) * DTypes.typeSize(dtype) / 4
  const accumulate = repeat(
    rps,
    "r",
    out,
    (r) =>
      `let v = piece(${staged ? `(grp * ${rps}u + ${r}) * ${rowWords * 4}u, s * 32u + lane` : `rowb[${r}], p`});
${
        repeat(N, "n", out, (n) =>
          `var t = 0.0;
${repeat(8, "i", out, (i) => `t += dot(v[${i}], bs[(s * ${N}u + ${n}) * 256u + ${i} * ${LANES}u + lane]);`)}
acc[${r} * ${N}u + ${n}] += t;`)
      }`
  )
  const reduce = subgroups
    ? repeat(rps * N, "j", out, (j) =>
      `let total = subgroupAdd(acc[${j}]);
if (lane == 0u) { red[grp * ${rps * N}u + ${j}] = total; }`)
    : `  for (var j = 0u; j < ${rps * N}u; j++) {
    workgroupBarrier();
    part[lid] = acc[j];
    workgroupBarrier();
    if (lane == 0u) {
      var t = 0.0;
      for (var s = 0u; s < ${LANES}u; s++) { t += part[lid + s]; }
      red[grp * ${rps * N}u + j] = t;
    }
  }`
  return KernelSpec.make({
    variant: { family: staged ? "mvqs" : "mvq", dtype, columns: N, rows: rps, stage, bias, subgroups, out },
    ...(subgroups ? { enables: ["subgroups"] } : {}),
    operands,
    params,
    workgroups: [Math.min(groups, target.maxWorkgroups), Math.ceil(groups / target.maxWorkgroups), batches],
    ...(staged ? { vec4: true, fallback: quantizedMatVec(product, dtype, target, rps, stage) } : {}),
    main: `
${staged ? `var<workgroup> as_: array<u32, ${rowsPerGroup * rowWords}>;\nfn qws(w: u32) -> u32 { return as_[w]; }` : ""}
${pieces(dtype, staged ? "qws" : "qwi_a")}
var<workgroup> bs: array<vec4<f32>, ${stage * N * 256}>;
var<workgroup> part: array<f32, ${WG}>;
var<workgroup> red: array<f32, ${GROUPS * rps * N}>;
${subgroups ? `${SUBGROUP_LANES}\n${entry(WG, true)}` : entry(WG)}
  let lane = lid % ${LANES}u;
  let grp = lid / ${LANES}u;
  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;
  let row0 = (wid.x + wid.y * nwg.x) * ${rowsPerGroup}u;
  let K = P.a_ne0;
  // rows past the end read row M - 1 again: every lane must reach the barriers
  var rowb: array<u32, ${rps}>;
  ${
      repeat(rps, "r", out, (r) =>
        `rowb[${r}] = ix_a(0u, min(row0 + grp * ${rps}u + ${r}, P.d_ne0 - 1u), b2 / P.r2, b3 / P.r3);`)
    }
  var acc: array<f32, ${rps * N}>;
  for (var c = 0u; c < K; c += ${stage * CHUNK}u) {
    workgroupBarrier();
    // b's chunks, vec4 v of a chunk at (v % 8) * 32 + v / 8: lane l reads its piece's vec4 i at i * 32 + l,
    // so the lanes of a group read consecutive vec4 (no bank conflicts)
    for (var s = 0u; s < ${stage}u; s++) {
      let k = c + s * ${CHUNK}u + 4u * lid;
      for (var n = 0u; n < ${N}u; n++) {
        var x = vec4<f32>(0.0);
        if (k < K) {
          x = vec4<f32>(ld_b(ix_b(k, n, b2, b3)), ld_b(ix_b(k + 1u, n, b2, b3)), ld_b(ix_b(k + 2u, n, b2, b3)), ld_b(ix_b(k + 3u, n, b2, b3)));
        }
        bs[(s * ${N}u + n) * 256u + (lid % 8u) * ${LANES}u + lid / 8u] = x;
      }
    }${
      staged
        ? `
    let cb = (c / ${DTypes.blockSize(dtype)}u) * ${DTypes.typeSize(dtype)}u;
    let rowBytes = (K / ${DTypes.blockSize(dtype)}u) * ${DTypes.typeSize(dtype)}u;
    for (var v = lid; v < ${rowsPerGroup * rowWords / 4}u; v += ${WG}u) {
      let slot = v / ${rowWords / 4}u;
      let w4 = v % ${rowWords / 4}u;
      let byte = cb + w4 * 16u;
      var x = vec4<u32>(0u);
      if (byte < rowBytes) {
        x = qv_a((ix_a(0u, min(row0 + slot, P.d_ne0 - 1u), b2 / P.r2, b3 / P.r3) + byte) >> 4u);
      }
      let at = slot * ${rowWords}u + w4 * 4u;
      as_[at] = x.x;
      as_[at + 1u] = x.y;
      as_[at + 2u] = x.z;
      as_[at + 3u] = x.w;
    }`
        : ""
    }
    workgroupBarrier();
    for (var s = 0u; s < ${stage}u; s++) {
      let p = (c + s * ${CHUNK}u) / 32u + lane;
      if (p * 32u < K) {
${accumulate}
      }
    }
  }
${reduce}
  workgroupBarrier();
  // one thread per result of the workgroup: its group's partial, then the bias
  if (lid < ${rowsPerGroup * N}u) {
    let g = lid / ${rps * N}u;
    let j = lid % ${rps * N}u;
    let row = row0 + g * ${rps}u + j / ${N}u;
    let nn = j % ${N}u;
    let m = row;
    var v = red[lid];
    ${epilogue}
    if (row < P.d_ne0) { st_d(ix_d(m, nn, b2, b3), v); }
  }
}`
  })
}

/**
 * @internal: chunks of b for the staged form (a's rows staged in workgroup memory too): the fewest whose
 * bytes of a row are whole 16-byte words, or undefined where a's strides or the workgroup memory do not
 * allow it (`rps` rows per group, `N` columns)
 */
export const stagedChunks = (a: Tensor.Tensor, N: number, rps: number, storage: number): number | undefined => {
  const dtype = a.dtype as DType.Quantized
  if (a.nb.slice(1).some((nb) => nb % 16 !== 0)) return undefined
  const bytes = (stage: number) => (stage * CHUNK / DTypes.blockSize(dtype)) * DTypes.typeSize(dtype)
  const stage = range(4).map((i) => i + 1).find((s) => bytes(s) % 16 === 0)
  if (stage === undefined) return undefined
  return stagedBytes(dtype, N, rps, stage) <= storage ? stage : undefined
}

/** workgroup memory of the staged form: a's staged rows besides b's chunks and the reduction */
const stagedBytes = (dtype: DType.Quantized, N: number, rps: number, stage: number) =>
  sharedBytes(N, stage) + GROUPS * rps * (stage * CHUNK / DTypes.blockSize(dtype)) * DTypes.typeSize(dtype)

/**
 * @internal: what the int8 form computes: one product; a gated FFN's two (silu(a b) * (u b)); or a stack of
 * `parts` products over the same b, their rows one after another (the parts' first rows in params s1..,
 * and in `starts` where known)
 */
export type Int8Form =
  | { readonly kind: "plain" }
  | { readonly kind: "gated" }
  | { readonly kind: "stack"; readonly parts: number; readonly starts?: ReadonlyArray<number> }

/**
 * the int8 form's shape: subgroups of 32 lanes per workgroup, rows per subgroup (the best on the H200 over
 * the shapes models decode with; benchmarks/RESULTS.md, "Choices")
 */
const INT8_WARPS = 8
const INT8_ROWS = 2

/** workgroup memory of the int8 form: b's K values as int8 and a scale and sum per block, the reduction */
const int8Bytes = (K: number) => K + (K / 32) * 8 + INT8_WARPS * LANES * 4

/**
 * @internal: whether the int8 form computes `product`: q4_0 or q8_0 weights whose rows are whole pairs
 * of blocks (K a multiple of 64) at whole words, one column, dot4I8Packed on the device, b's blocks fitting
 * the workgroup memory
 */
export const int8Applies = (product: Pick<Product, "N" | "K">, a: Tensor.Tensor, target: KernelTarget): boolean =>
  (a.dtype === "q4_0" || a.dtype === "q8_0") && target.dot4 === true && product.N === 1 && product.K % 64 === 0 &&
  a.nb.slice(1).every((nb) => nb % 4 === 0) && int8Bytes(product.K) <= (target.workgroupStorage ?? 16384)

/**
 * @internal: the int8 matrix-vector kernel (decode of q4_0 and q8_0, as llama.cpp's MMVQ): each workgroup
 * first rounds b to q8_0 blocks in workgroup memory (ggml's CPU rounds activations so for these types),
 * then each lane takes a pair of blocks of a row at a time (q4_0 36 bytes, q8_0 68: whole words) and
 * sums int8 products with dot4I8Packed, four values per instruction; a subgroup of 32 lanes owns
 * INT8_ROWS rows: fewer instructions and less of b's traffic per weight byte than the f32 form
 * (benchmarks/RESULTS.md has the figures).
 * Needs a's bytes at a 16-byte offset (a vec4 binding), else the f32 form runs. `gated`: a gated FFN's
 * gate (a) and up (u) weights over the same b, written as silu(a b) * (u b) (mul_mat_swiglu): b rounded
 * once, one dispatch for both products and the swiglu.
 */
export const int8MatVec = (
  product: Product,
  b: Tensor.Tensor,
  dtype: "q4_0" | "q8_0",
  target: KernelTarget,
  fallback: Kernel,
  form: Int8Form = { kind: "plain" }
): Kernel => {
  const gated = form.kind === "gated"
  const { K, M, batches, bias, epilogue, operands, params } = product
  const WGS = INT8_WARPS * LANES
  const R = INT8_ROWS
  const rowsPerGroup = INT8_WARPS * R
  const groups = Math.ceil(M / rowsPerGroup)
  const pairs = K / 64
  const subgroups = target.subgroups === true && target.subgroupSize === LANES
  // b read four values per load where its rows are contiguous runs of fours
  const fours = stridesAligned(b, 4)
  // a pair of blocks in words: q4_0 (d, 16 bytes) x 2 = 9 words, where the first block's quants start at
  // byte 2 and the second's at byte 20; q8_0 (d, 32 bytes) x 2 = 17 words, quants at bytes 2 and 36
  const PW = dtype === "q4_0" ? 9 : 17
  // the pair's words of weight operand `n` (a; u, the up weights of a gated product; a1.. of a stack)
  const load = (n: string, rowWord: string) =>
    `for (var k = 0u; k < ${PW}u; k++) { w[k] = qwi_${n}(${rowWord}[r] + p * ${PW}u + k); }`
  // the pair's dot products with b into `acc`
  const dot = (acc: string) =>
    dtype === "q4_0"
      ? `{
  let d0 = unpack2x16float(w[0]).x;
  let d1 = unpack2x16float(w[4]).y;
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 4u; i++) {
    let q = (w[i] >> 16u) | (w[i + 1u] << 16u);
    s0 += dot4I8Packed(q & 0x0f0f0f0fu, y[i]) + dot4I8Packed((q >> 4u) & 0x0f0f0f0fu, y[4u + i]);
    s1 += dot4I8Packed(w[5u + i] & 0x0f0f0f0fu, y[8u + i]) + dot4I8Packed((w[5u + i] >> 4u) & 0x0f0f0f0fu, y[12u + i]);
  }
  // q4_0 values are nibbles - 8: the 8s come off through the block's sum of b's int8 values
  ${acc}[r] += d0 * e0.x * (f32(s0) - 8.0 * e0.y) + d1 * e1.x * (f32(s1) - 8.0 * e1.y);
}`
      : `{
  let d0 = unpack2x16float(w[0]).x;
  let d1 = unpack2x16float(w[8]).y;
  var s0 = 0i;
  var s1 = 0i;
  for (var i = 0u; i < 8u; i++) {
    s0 += dot4I8Packed((w[i] >> 16u) | (w[i + 1u] << 16u), y[i]);
    s1 += dot4I8Packed(w[9u + i], y[8u + i]);
  }
  ${acc}[r] += d0 * e0.x * f32(s0) + d1 * e1.x * f32(s1);
}`
  const weights = form.kind === "gated"
    ? ["a", "u"]
    : form.kind === "stack"
    ? stackWeights(form.parts)
    : ["a"]
  // a stack whose parts are whole workgroups of rows: each workgroup's part is found once, and its loop
  // reads that part's weights alone (a branch a row kept both rows' loads from going out together: an 8B
  // q/k/v stack ran at half the plain form's bandwidth, benchmarks/RESULTS.md)
  const uniform = form.kind === "stack" && form.starts !== undefined && M % rowsPerGroup === 0 &&
    form.starts.every((s) => s % rowsPerGroup === 0)
  // the rows' first words: from `row` on in weights `n`
  const rowWordsOf = (n: string, row: string) =>
    `  var rowWord_${n}: array<u32, ${R}>;
  for (var r = 0u; r < ${R}u; r++) {
    rowWord_${n}[r] = ix_${n}(0u, min(${row} + r, P.d_ne0 - 1u), b2 / P.r2, b3 / P.r3) >> 2u;
  }`
  // the walk over a row's pairs of blocks, `inner` for each of the subgroup's rows r with the pair's words w
  const walk = (inner: string) =>
    `  for (var p = lane; p < ${pairs}u; p += ${LANES}u) {
    let y = array<u32, 16>(${
      range(4).map((j) => {
        const at = `ys[${j * pairs}u + p]`
        return `${at}.x, ${at}.y, ${at}.z, ${at}.w`
      }).join(", ")
    });
    let e0 = es[2u * p];
    let e1 = es[2u * p + 1u];
    for (var r = 0u; r < ${R}u; r++) {
      var w: array<u32, ${PW}>;
${inner}
    }
  }`
  const rows = form.kind !== "stack"
    ? `${weights.map((n) => rowWordsOf(n, "row0")).join("\n")}
${
      walk(
        form.kind === "gated"
          ? `${load("a", "rowWord_a")}\n${dot("acc")}\n${load("u", "rowWord_u")}\n${dot("accu")}`
          : `${load("a", "rowWord_a")}\n${dot("acc")}`
      )
    }`
    : uniform
    ? `  let wrow = (wid.x + wid.y * nwg.x) * ${rowsPerGroup}u;
  var wpart = 0u;
  var prow = row0;
${
      range(form.parts - 1).map((i) => `  if (wrow >= P.s${i + 1}) { wpart = ${i + 1}u; prow = row0 - P.s${i + 1}; }`)
        .join("\n")
    }
${
      weights.map((n, i) =>
        `  ${i > 0 ? "else " : ""}if (wpart == ${i}u) {
${rowWordsOf(n, "prow")}
${walk(`${load(n, `rowWord_${n}`)}\n${dot("acc")}`)}
  }`
      ).join("\n")
    }`
    : `${stackRows(form.parts, R, 2, "rowWord", "rowPart")}
${
      walk(
        `${weights.map((n, i) => `${i > 0 ? "else " : ""}if (rowPart[r] == ${i}u) { ${load(n, "rowWord")} }`).join(" ")}
${dot("acc")}`
      )
    }`
  const reduce = (acc: string, red: string) =>
    subgroups
      ? `  for (var r = 0u; r < ${R}u; r++) {
    let total = subgroupAdd(${acc}[r]);
    if (lane == 0u) { ${red}[grp * ${R}u + r] = total; }
  }`
      : `  for (var r = 0u; r < ${R}u; r++) {
    workgroupBarrier();
    part[lid] = ${acc}[r];
    workgroupBarrier();
    if (lane == 0u) {
      var t = 0.0;
      for (var s = 0u; s < ${LANES}u; s++) { t += part[lid + s]; }
      ${red}[grp * ${R}u + r] = t;
    }
  }`
  return KernelSpec.make({
    variant: {
      family: form.kind === "gated" ? "mvq8_swiglu" : form.kind === "stack" ? "mvq8_stack" : "mvq8",
      dtype,
      K,
      rows: R,
      bias,
      subgroups,
      fours,
      parts: weights.length,
      ...(uniform ? { uniform } : {})
    },
    enables: subgroups ? ["subgroups"] : [],
    operands,
    params,
    workgroups: [Math.min(groups, target.maxWorkgroups), Math.ceil(groups / target.maxWorkgroups), batches],
    vec4: true,
    scalar: weights,
    fallback,
    main: `
// b's blocks as int8, vec4 j of pair p at j * ${pairs} + p (lanes read consecutive vec4); each block's
// scale (f16-rounded, as a q8_0 block stores it) and the sum of its int8 values
var<workgroup> ys: array<vec4<u32>, ${K / 16}>;
var<workgroup> es: array<vec2<f32>, ${K / 32}>;
var<workgroup> part: array<f32, ${subgroups ? 1 : WGS}>;
var<workgroup> red: array<f32, ${rowsPerGroup}>;
${gated ? `var<workgroup> redu: array<f32, ${rowsPerGroup}>;` : ""}
${subgroups ? `${SUBGROUP_LANES}\n${entry(WGS, true)}` : entry(WGS)}
  let lane = lid % ${LANES}u;
  let grp = lid / ${LANES}u;
  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;
  let row0 = (wid.x + wid.y * nwg.x) * ${rowsPerGroup}u + grp * ${R}u;
  for (var blk = lid; blk < ${K / 32}u; blk += ${WGS}u) {
    var x: array<vec4<f32>, 8>;
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
      let k = blk * 32u + 4u * i;
      x[i] = ${
      fours
        ? "ld4_b(ix_b(k, 0u, b2, b3) >> 2u)"
        : "vec4<f32>(ld_b(ix_b(k, 0u, b2, b3)), ld_b(ix_b(k + 1u, 0u, b2, b3)), ld_b(ix_b(k + 2u, 0u, b2, b3)), ld_b(ix_b(k + 3u, 0u, b2, b3)))"
    };
      let m = abs(x[i]);
      amax = max(amax, max(max(m.x, m.y), max(m.z, m.w)));
    }
    // ggml's quantize_row_q8_0: d = amax / 127, values rounded half away from zero
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d > 0.0);
    var sum = 0i;
    var q: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
      let v = x[i] * id;
      let r = vec4<i32>(trunc(v + select(vec4<f32>(-0.5), vec4<f32>(0.5), v >= vec4<f32>(0.0))));
      sum += r.x + r.y + r.z + r.w;
      q[i] = pack4xI8(r);
    }
    let p = blk / 2u;
    let h = (blk % 2u) * 2u;
    ys[h * ${pairs}u + p] = vec4<u32>(q[0], q[1], q[2], q[3]);
    ys[(h + 1u) * ${pairs}u + p] = vec4<u32>(q[4], q[5], q[6], q[7]);
    es[blk] = vec2<f32>(quantizeToF16(d), f32(sum));
  }
  workgroupBarrier();
  // rows past the end read row M - 1 again and are not written
  var acc: array<f32, ${R}>;
  var accu: array<f32, ${R}>;
${rows}
${reduce("acc", "red")}
${gated ? reduce("accu", "redu") : ""}
  workgroupBarrier();
  if (lid < ${rowsPerGroup}u) {
    let row = (wid.x + wid.y * nwg.x) * ${rowsPerGroup}u + lid;
    let m = row;
    let nn = 0u;
    var v = ${gated ? "silu_s(red[lid]) * redu[lid]" : "red[lid]"};
    ${epilogue}
    if (row < P.d_ne0) { st_d(ix_d(m, nn, b2, b3), v); }
  }
}`
  })
}
