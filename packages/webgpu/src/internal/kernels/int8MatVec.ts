/**
 * The int8 matrix-vector kernel for decode of every block type (q4_0, q4_1, q5_0, q8_0, q4_K, q6_K; as
 * llama.cpp's MMVQ): b rounded to int8 blocks by each workgroup (q8_0's for the 32-value types, q8_K's for
 * the k-quants, as ggml's CPU rounds it for each), int8 dot products over 64 values of a row at a time
 * (int8Blocks.ts reads each type); one product, a gated FFN's two with their swiglu, or a stack of products
 * over the same b; K split over several workgroups where asked (int8Splits.ts).
 *
 * @internal
 */
import type * as Tensor from "@effect-gpu/core/Tensor"
import type { Int8Type } from "./int8Blocks.js"
import { helpers, K_WORDS, kDot, kLoad, PAIR_WORDS, pairDot } from "./int8Blocks.js"
import * as Rounding from "./int8Rounding.js"
import * as Splits from "./int8Splits.js"
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, stridesAligned, SUBGROUP_LANES } from "./kernel.js"
import type { Form, Product } from "./product.js"
import { stackRows, stackWeights } from "./product.js"

/** lanes of a subgroup */
const LANES = 32

/**
 * @internal: what the int8 form computes (Product.Form): a stack also with its parts' first rows where
 * known (`starts`) and each part's weight type where they differ (of one rounding of b: `roundsAlike`)
 */
export type Int8Form = Form<{ readonly starts?: ReadonlyArray<number>; readonly types?: ReadonlyArray<Int8Type> }>

/**
 * the int8 form's shape: subgroups of 32 lanes per workgroup, rows per subgroup (the best on the H200 over
 * the shapes models decode with; benchmarks/RESULTS.md, "Choices")
 */
const INT8_WARPS = 8
const INT8_ROWS = 2
/**
 * the most workgroups of the int8 form on GPUs, each taking row groups in turn beyond (three a
 * multiprocessor on an H200 or H100): b is rounded once a workgroup, not once a group, and no last wave
 * runs part full (benchmarks/RESULTS.md, choices: matrix-vector)
 */
const IN_TURN = 396

/** @internal: the weight types of the int8 form */
export type { Int8Type }

const INT8_TYPES: ReadonlySet<string> = new Set(["q4_0", "q4_1", "q5_0", "q8_0", "q4_K", "q6_K"])

/** the k-quants: blocks of 256 values, b rounded as q8_K (one f32 scale a block of 256) */
const kQuant = (dtype: Int8Type) => dtype === "q4_K" || dtype === "q6_K"

/** rows a subgroup of the int8 form owns on `target` */
const rowsOf = (target: KernelTarget) => Math.max(1, Math.floor(target.quantizedDecode?.int8Rows ?? INT8_ROWS))
/**
 * subgroups a workgroup of the int8 form has on `target`: INT8_WARPS, at most the adapter's invocations allow
 * (16 ran slower: benchmarks/RESULTS.md)
 */
const warpsOf = (target: KernelTarget) =>
  Math.max(1, Math.min(INT8_WARPS, Math.floor((target.workgroupInvocations ?? 256) / LANES)))

/**
 * @internal: the workgroups the int8 form splits a product's K over (int8Splits.ts): 1 unless asked; K cut
 * into whole runs of a lane's 64 values (a k-quant's blocks of 256)
 */
export const int8Splits = (product: Pick<Product, "M" | "K" | "batches">, dtype: string, target: KernelTarget) =>
  Splits.splitsOf(
    product.K,
    dtype === "q4_K" || dtype === "q6_K" ? 256 : 64,
    Math.ceil(product.M / (warpsOf(target) * rowsOf(target))) * product.batches,
    target
  )

/**
 * @internal: bytes of partial sums after the result of a product the int8 form computes in splits (a gated
 * product keeps its two products' sums)
 */
export const int8Scratch = (
  product: Pick<Product, "M" | "K" | "batches">,
  dtype: string,
  gated: boolean,
  target: KernelTarget
) => Splits.scratchOf(int8Splits(product, dtype, target), product.M * product.batches, gated ? 2 : 1)

/**
 * @internal: whether weights of these types can share one rounding of b (a stack's parts): all 32-value
 * block types (q8_0 blocks) or all k-quants (q8_K)
 */
export const roundsAlike = (types: ReadonlyArray<string>): boolean =>
  types.every((t) => INT8_TYPES.has(t)) &&
  new Set(types.map((t) => t === "q4_K" || t === "q6_K")).size <= 1

/**
 * workgroup memory of the int8 form: b's K values as int8 and a scale and sum per 32, the reduction; the
 * k-quants also a signed maximum per 256
 */
const int8Bytes = (K: number, dtype: string, warps: number) =>
  K + (K / 32) * 8 + warps * LANES * 4 + (dtype === "q4_K" || dtype === "q6_K" ? (K / 256) * 4 : 0)

/**
 * @internal: whether the int8 form computes `product`: weights of a block type whose rows are whole runs
 * of 64 values (K a multiple of 64; 256 for the k-quants, their blocks) at whole words, one
 * column, dot4I8Packed on the device, b's blocks fitting the workgroup memory
 */
export const int8Applies = (product: Pick<Product, "N" | "K">, a: Tensor.Tensor, target: KernelTarget): boolean =>
  INT8_TYPES.has(a.dtype) && target.dot4 === true && product.N === 1 &&
  product.K % (a.dtype === "q4_K" || a.dtype === "q6_K" ? 256 : 64) === 0 &&
  a.nb.slice(1).every((nb) => nb % 4 === 0) && int8Bytes(product.K, a.dtype, warpsOf(target)) <=
    (target.workgroupStorage ?? 16384)

/**
 * @internal: the int8 matrix-vector kernel (decode of the block types, as llama.cpp's MMVQ):
 * each workgroup first rounds b to int8 blocks in workgroup memory (ggml's CPU rounds activations so for
 * these types: q8_0 blocks of 32 with an f16 scale, q8_K blocks of 256 with an f32 scale), then each lane
 * takes 64 values of a row at a time (the 32-value types: a pair of blocks, at whole words; the k-quants:
 * a quarter of a block) and sums int8 products with dot4I8Packed, four values per instruction;
 * a subgroup of 32 lanes owns INT8_ROWS rows (QuantizedDecode.int8Rows overrides): fewer instructions and
 * less of b's traffic per weight byte than the f32 form (benchmarks/RESULTS.md has the figures).
 * Needs a's bytes at a 16-byte offset (a vec4 binding), else the f32 form runs. `gated`: a gated FFN's
 * gate (a) and up (u) weights over the same b, written as silu(a b) * (u b) (mul_mat_swiglu): b rounded
 * once, one dispatch for both products and the swiglu.
 */
export const int8MatVec = (
  product: Product,
  b: Tensor.Tensor,
  dtype: Int8Type,
  target: KernelTarget,
  fallback: Kernel,
  form: Int8Form = { kind: "plain" },
  splitting = true
): Kernel => {
  const gated = form.kind === "gated"
  const stores = form.kind === "stack" ? form.stores : undefined
  const WARPS = warpsOf(target)
  const WGS = WARPS * LANES
  const { K, M, batches, bias, epilogue, params } = product
  // split-K (int8Splits.ts): each workgroup takes K / S of b and of its rows; a second dispatch adds up
  const S = splitting ? int8Splits(product, dtype, target) : 1
  const split = S > 1 ? Splits.splitK(product, S, gated, stores) : undefined
  const Ks = K / S
  // b made here where its workgroup memory fits beside b's blocks (else b is read, and no fusion takes this)
  const made = form.made !== undefined &&
      int8Bytes(Ks, dtype, WARPS) + form.made.workgroupBytes(WGS) <= (target.workgroupStorage ?? 16384)
    ? form.made
    : undefined
  // the stores this kernel makes (a split product's merge makes them)
  const kept = split === undefined ? stores : undefined
  // b made here, not bound; a split product's result reaching over its partial sums
  const operands = (made === undefined ? product.operands : product.operands.filter((o) => o.name !== "b"))
    .map((o) => split !== undefined && o.name === "d" ? split.d : o)
  const R = rowsOf(target)
  const rowsPerGroup = WARPS * R
  const groups = Math.ceil(M / rowsPerGroup)
  // the pairs of blocks a workgroup walks (of its split)
  const pairs = Ks / 64
  // b's index from a workgroup's k (its split's first value kb on)
  const kOf = (k: string) => split !== undefined ? `kb + ${k}` : k
  const subgroups = target.subgroups === true && target.subgroupSize === LANES
  // b read four values per load where its rows are contiguous runs of fours
  const fours = stridesAligned(b, 4)
  const weights = form.kind === "gated"
    ? ["a", "u"]
    : form.kind === "stack"
    ? stackWeights(form.parts)
    : ["a"]
  // each weight operand's type: a stack's parts may differ (one rounding of b), else all `dtype`
  const typeOf = (n: string): Int8Type =>
    (form.kind === "stack" ? form.types?.[weights.indexOf(n)] : undefined) ?? dtype
  const types = [...new Set(weights.map(typeOf))]
  // the words of a lane's 64 values (PAIR_WORDS, K_WORDS): the most any part's type takes
  const wordsOf = (t: Int8Type) => t === "q4_K" || t === "q6_K" ? K_WORDS[t] : PAIR_WORDS[t]
  const PW = Math.max(...types.map(wordsOf))
  // the pair's words of weight operand `n` (a; u, the up weights of a gated product; a1.. of a stack)
  const load = (n: string, rowWord: string) => {
    const t = typeOf(n)
    return t === "q4_K" || t === "q6_K"
      ? kLoad(t, n, rowWord)
      : `for (var k = 0u; k < ${wordsOf(t)}u; k++) { w[k] = qwi_${n}(${rowWord}[r] + p * ${wordsOf(t)}u + k); }`
  }
  // the pair's dot products of weight operand `n` with b into `acc`
  const dotOf = (n: string, acc: string) => {
    const t = typeOf(n)
    return t === "q4_K" || t === "q6_K" ? kDot(t, acc) : pairDot(t, acc)
  }
  const dot = (acc: string) => dotOf(weights[0], acc)
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
      const at = `ys[${j * pairs}u + lp]`
      return `${at}.x, ${at}.y, ${at}.z, ${at}.w`
    }).join(", ")
  });
    let e0 = es[2u * lp];
    let e1 = es[2u * lp + 1u];`
  // (lp the pair within the workgroup's split, p within the row)
  const walk = (inner: string) =>
    `  for (var lp = lane; lp < ${pairs}u; lp += ${LANES}u) {
    let p = ${split !== undefined ? "lp + pb" : "lp"};
    ${pairOfB}
    for (var r = 0u; r < ${R}u; r++) {
      var w: array<u32, ${PW}>;
${inner}
    }
  }`
  // workgroups that take the row groups in turn (b rounded once for several groups): at most `inTurn`, each
  // taking as many groups as the others (the last one's a few rows fewer)
  const inTurn = target.quantizedDecode?.int8Groups ?? (target.software === true ? undefined : IN_TURN)
  const turns = inTurn !== undefined && inTurn >= 1 && split === undefined && batches === 1 && groups > inTurn
    ? Math.ceil(groups / Math.ceil(groups / Math.floor(inTurn)))
    : undefined
  // the workgroup's part of a uniform stack and its first row there
  const partOfGroup = `  let wrow = gi * ${rowsPerGroup}u;
  var wpart = 0u;
  var prow = row0;
${
    range(form.kind === "stack" ? form.parts - 1 : 0).map((i) =>
      `  if (wrow >= P.s${i + 1}) { wpart = ${i + 1}u; prow = row0 - P.s${i + 1}; }`
    ).join("\n")
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
    ? `${partOfGroup}
${
      weights.map((n, i) =>
        `  ${i > 0 ? "else " : ""}if (wpart == ${i}u) {
${rowWordsOf(n, "prow")}
${walk(`${load(n, `rowWord_${n}`)}\n${dotOf(n, "acc")}`)}
  }`
      ).join("\n")
    }`
    : `${stackRows(form.parts, R, 2, "rowWord", "rowPart")}
${
      walk(
        types.length === 1
          ? `${
            weights.map((n, i) => `${i > 0 ? "else " : ""}if (rowPart[r] == ${i}u) { ${load(n, "rowWord")} }`).join(" ")
          }
${dot("acc")}`
          : weights.map((n, i) =>
            `${i > 0 ? "else " : ""}if (rowPart[r] == ${i}u) { ${load(n, "rowWord")}\n${dotOf(n, "acc")} }`
          ).join(" ")
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
  // b's four values from k
  const fourAt = (k: string) =>
    made !== undefined
      ? made.fourAt(k)
      : fours
      ? `ld4_b(ix_b(${k}, 0u, b2, b3) >> 2u)`
      : `vec4<f32>(${range(4).map((i) => `ld_b(ix_b(${k} + ${i}u, 0u, b2, b3))`).join(", ")})`
  // b's blocks in workgroup memory (int8Rounding.ts): K values a split of b, the pairs a row walks
  const layout: Rounding.Layout = { Ks, pairs, invocations: WGS }
  // b made by a norm read once (scaled): each block rounded from its unscaled values (a block's rounding is
  // the same for any scale of it) while the row's squares add up, then each block's scale times the row's
  const scaled = target.quantizedDecode?.normOnce !== false && made?.scaled !== undefined && split === undefined &&
      !kQuant(dtype)
    ? made.scaled
    : undefined
  const lanes = subgroups ? LANES : undefined
  const roundB = kQuant(dtype)
    ? Rounding.roundQ8K(layout, (k) => fourAt(kOf(k)))
    : scaled !== undefined
    ? Rounding.roundScaled(layout, scaled, lanes)
    : Rounding.roundQ80(layout, (k) => fourAt(kOf(k)))
  // b's prologue and its rounding into workgroup memory
  const rounding = `${scaled === undefined ? made?.prologue(WGS, lanes) ?? "" : ""}
${roundB}`
  // each row's result: its bias, a gated product's swiglu, a stack's stores
  const results = `  if (lid < ${rowsPerGroup}u) {
    let row = gi * ${rowsPerGroup}u + lid;
    let m = row;
    let nn = 0u;
    var v = ${gated ? "silu_s(red[lid]) * redu[lid]" : "red[lid]"};
    ${epilogue}
    if (row < P.d_ne0) {
      st_d(ix_d(m, nn, b2, b3), v);
      ${stores?.code ?? ""}
    }
  }`
  // a split's sums of its rows into the scratch after the result (each set split by split), for its merge
  const count = M * batches
  const partials = `  if (lid < ${rowsPerGroup}u) {
    let row = gi * ${rowsPerGroup}u + lid;
    if (row < P.d_ne0) {
      let at = P.d_o + P.scratch + sp * ${count}u + bz * P.d_ne0 + row;
      st_d(at, red[lid]);
      ${gated ? `st_d(at + ${S * count}u, redu[lid]);` : ""}
    }
  }`
  // a row group's work: its rows' sums and results (b rounded before, in the one-group form here)
  const groupBody = `  let row0 = gi * ${rowsPerGroup}u + grp * ${R}u;
${
    turns !== undefined ? "" : `${rounding}
  workgroupBarrier();`
  }
  // rows past the end read row M - 1 again and are not written; the sums set to zero outright (a var
  // declared in a loop without a value kept the last group's sums on lavapipe)
  var acc = array<f32, ${R}>();
  var accu = array<f32, ${R}>();
${rows}
${reduce("acc", "red")}
${gated ? reduce("accu", "redu") : ""}
  workgroupBarrier();
${split !== undefined ? partials : results}`
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
      ...(R !== INT8_ROWS ? { int8Rows: R } : {}),
      ...(WARPS !== INT8_WARPS ? { int8Warps: WARPS } : {}),
      ...(types.length > 1 ? { types: weights.map(typeOf).join(",") } : {}),
      ...(split !== undefined ? { splits: S } : {}),
      ...(turns !== undefined ? { inTurn: turns } : {}),
      ...(scaled !== undefined ? { normOnce: true } : {}),
      ...made?.variant,
      ...stores?.variant
    },
    enables: subgroups ? ["subgroups"] : [],
    // a split product's stores are its merge's
    operands: [...operands, ...(kept?.operands ?? []), ...(made?.operands ?? [])],
    params: [
      ...params,
      ...(split !== undefined ? [split.scratch] : []),
      ...(kept?.params ?? []),
      ...(made?.params ?? [])
    ],
    workgroups: turns !== undefined
      ? [turns, 1, 1]
      : [Math.min(groups, target.maxWorkgroups), Math.ceil(groups / target.maxWorkgroups), batches * S],
    vec4: true,
    scalar: [
      ...weights,
      ...(kept?.operands.map((o) => o.name) ?? []),
      ...(made?.operands.filter((o) => o.tensor.dtype === "i32").map((o) => o.name) ?? [])
    ],
    // the unsplit form where the partial sums do not fit after the result
    fallback: split !== undefined
      ? int8MatVec(product, b, dtype, target, fallback, form, false)
      : fallback,
    ...(split !== undefined ? { next: split.merge } : {}),
    main: `
// b's blocks as int8, vec4 j of pair p at j * ${pairs} + p (lanes read consecutive vec4); each 32 values'
// scale (f16-rounded as a q8_0 block stores it; a q8_K block's f32 one) and the sum of their int8 values
var<workgroup> ys: array<vec4<u32>, ${Ks / 16}>;
var<workgroup> es: array<vec2<f32>, ${Ks / 32}>;
${kQuant(dtype) ? `var<workgroup> tops: array<f32, ${Ks / 256}>;` : ""}
${types.map(helpers).join("\n")}
${kept?.decls ?? ""}
${made?.decls(WGS) ?? ""}
var<workgroup> part: array<f32, ${subgroups ? 1 : WGS}>;
var<workgroup> red: array<f32, ${rowsPerGroup}>;
${gated ? `var<workgroup> redu: array<f32, ${rowsPerGroup}>;` : ""}
${subgroups ? `${SUBGROUP_LANES}\n${entry(WGS, true)}` : entry(WGS)}
  let lane = lid % ${LANES}u;
  let grp = lid / ${LANES}u;
${
      split !== undefined
        ? `  // split sp of batch bz: K from kb, pairs from pb
  let sp = wid.z % ${S}u;
  let bz = wid.z / ${S}u;
  let kb = sp * ${Ks}u;
  let pb = sp * ${pairs}u;
  let b2 = bz % P.d_ne2;
  let b3 = bz / P.d_ne2;`
        : `  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;`
    }
${
      turns !== undefined
        ? `${rounding}
  workgroupBarrier();
  // the row groups in turn over the one rounding of b
  for (var gi = wid.x; gi < ${groups}u; gi += nwg.x) {
${groupBody}
  workgroupBarrier();
  }`
        : `  let gi = wid.x + wid.y * nwg.x;
${groupBody}`
    }
}`
  })
}
