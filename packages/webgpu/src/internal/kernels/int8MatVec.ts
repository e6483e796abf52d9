/**
 * The int8 matrix-vector kernel for q4_0 and q8_0 decode (as llama.cpp's MMVQ): b rounded to q8_0 blocks by
 * each workgroup, int8 dot products over pairs of blocks; one product, a gated FFN's two with their
 * swiglu, or a stack of products over the same b.
 *
 * @internal
 */
import type * as Tensor from "@effect-gpu/core/Tensor"
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, repeat, stridesAligned, SUBGROUP_LANES } from "./kernel.js"
import type { Product } from "./product.js"
import { stackRows, stackWeights } from "./product.js"

/** lanes of a subgroup */
const LANES = 32

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
  // pair p's values of b (as int8 words) and its two blocks' scales and sums
  const pairOfB = `let y = array<u32, 16>(${
    range(4).map((j) => {
      const at = `ys[${j * pairs}u + p]`
      return `${at}.x, ${at}.y, ${at}.z, ${at}.w`
    }).join(", ")
  });
    let e0 = es[2u * p];
    let e1 = es[2u * p + 1u];`
  const walk = (inner: string, from = "lane") =>
    `  for (var p = ${from}; p < ${pairs}u; p += ${LANES}u) {
    ${pairOfB}
    for (var r = 0u; r < ${R}u; r++) {
      var w: array<u32, ${PW}>;
${inner}
    }
  }`
  // the prefetch form (plain and gated products): each lane's first pair of its rows loaded before b is
  // rounded, so that the weights' first reads wait while the workgroup rounds b, not after it
  const prefetch = target.quantizedDecode?.prefetch === true && form.kind !== "stack"
  const out = KernelSpec.writesOut(target)
  const accOf = (n: string) => n === "u" ? "accu" : "acc"
  const early = prefetch
    ? `${weights.map((n) => rowWordsOf(n, "row0")).join("\n")}
${weights.map((n) => `  var pre_${n}: array<u32, ${R * PW}>;`).join("\n")}
  if (lane < ${pairs}u) {
${
      weights.map((n) =>
        repeat(R, "rr", out, (r) =>
          repeat(PW, "kk", out, (k) =>
            `pre_${n}[${r} * ${PW}u + ${k}] = qwi_${n}(rowWord_${n}[${r}] + lane * ${PW}u + ${k});`))
      ).join("\n")
    }
  }`
    : ""
  const rows = form.kind !== "stack"
    ? prefetch
      ? `  if (lane < ${pairs}u) {
    let p = lane;
    ${pairOfB}
${
        repeat(R, "rr", out, (r) =>
          `let r = ${r};
${
            weights.map((n) =>
              `{ let w = array<u32, ${PW}>(${range(PW).map((k) => `pre_${n}[r * ${PW}u + ${k}u]`).join(", ")});
${dot(accOf(n))} }`
            ).join("\n")
          }`)
      }
  }
${walk(weights.map((n) => `${load(n, `rowWord_${n}`)}\n${dot(accOf(n))}`).join("\n"), `lane + ${LANES}u`)}`
      : `${weights.map((n) => rowWordsOf(n, "row0")).join("\n")}
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
      ...(uniform ? { uniform } : {}),
      ...(prefetch ? { prefetch } : {})
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
${early}
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
