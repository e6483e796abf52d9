/**
 * b's rounding into the int8 matrix-vector form's workgroup memory (int8MatVec.ts): as ggml's CPU rounds
 * activations for each block type (q8_0 blocks for the 32-value types, q8_K for the k-quants), from values
 * read or made by the kernel, or from a norm read once.
 *
 * @internal
 */
import type { MadeB } from "./product.js"

/**
 * @internal: where b's blocks go: `Ks` values a split of b (a run of `pairs` pairs of blocks a row walks),
 * rounded over `invocations`; as int8 in ys (vec4 j of pair p at j * pairs + p, lanes reading consecutive
 * vec4s), each block's scale and the sum of its int8 values in es
 */
export interface Layout {
  readonly Ks: number
  readonly pairs: number
  readonly invocations: number
}

/** a block's 32 int8 values (in q) and their sum stored where the pairs read them, with its scale d */
const storeBlock = (l: Layout) =>
  `    let p = blk / 2u;
    let h = (blk % 2u) * 2u;
    ys[h * ${l.pairs}u + p] = vec4<u32>(q[0], q[1], q[2], q[3]);
    ys[(h + 1u) * ${l.pairs}u + p] = vec4<u32>(q[4], q[5], q[6], q[7]);
    es[blk] = vec2<f32>(d, f32(sum));`

/**
 * each of the workgroup's blocks of 32 values of b: its eight vec4s into x by `load` (a statement setting
 * x[i]), rounded as ggml's quantize_row_q8_0 rounds them (amax / 127 their scale, values rounded half away
 * from zero), the scale stored as `scale` makes it of amax
 */
const roundBlocks = (l: Layout, load: string, scale: string) =>
  `  for (var blk = lid; blk < ${l.Ks / 32}u; blk += ${l.invocations}u) {
    var x: array<vec4<f32>, 8>;
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
      ${load}
      let m = abs(x[i]);
      amax = max(amax, max(max(m.x, m.y), max(m.z, m.w)));
    }
    let d = ${scale};
    let id = select(0.0, 1.0 / (amax / 127.0), amax > 0.0);
    var sum = 0i;
    var q: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
      let v = x[i] * id;
      let r = vec4<i32>(trunc(v + select(vec4<f32>(-0.5), vec4<f32>(0.5), v >= vec4<f32>(0.0))));
      sum += r.x + r.y + r.z + r.w;
      q[i] = pack4xI8(r);
    }
${storeBlock(l)}
  }`

/** @internal: ggml's quantize_row_q8_0 of b's four values from each k (`fourAt`): the scale stored as f16 */
export const roundQ80 = (l: Layout, fourAt: (k: string) => string) =>
  roundBlocks(l, `x[i] = ${fourAt("blk * 32u + 4u * i")};`, "quantizeToF16(amax / 127.0)")

/**
 * @internal: b made by a norm read once (MadeB.scaled): each block rounded from its unscaled values while the
 * row's squares add up, then each block's scale times the row's (`lanes`: the kernel's subgroups)
 */
export const roundScaled = (l: Layout, scaled: NonNullable<MadeB["scaled"]>, lanes?: number) =>
  `${scaled.begin}
${roundBlocks(l, scaled.load("blk * 32u + 4u * i", "x[i]"), "amax / 127.0")}
${scaled.scale(l.invocations, lanes)}
  for (var blk = lid; blk < ${l.Ks / 32}u; blk += ${l.invocations}u) { es[blk].x = quantizeToF16(es[blk].x * nscale); }`

/**
 * @internal: ggml's quantize_row_q8_K of b's four values from each k (`fourAt`): over each 256 values the one
 * of largest magnitude (the first of equals) sets iscale = -127 / it, values rounded to nearest even and kept
 * at 127 at most, d = 1 / iscale (f32); each 32 values' largest first, then each 256's from its eight
 */
export const roundQ8K = (l: Layout, fourAt: (k: string) => string) =>
  `  for (var blk = lid; blk < ${l.Ks / 32}u; blk += ${l.invocations}u) {
    var amax = 0.0;
    var top = 0.0;
    for (var i = 0u; i < 8u; i++) {
      let x = ${fourAt("blk * 32u + 4u * i")};
      for (var c = 0u; c < 4u; c++) {
        if (abs(x[c]) > amax) {
          amax = abs(x[c]);
          top = x[c];
        }
      }
    }
    es[blk] = vec2<f32>(amax, top);
  }
  workgroupBarrier();
  for (var sb = lid; sb < ${l.Ks / 256}u; sb += ${l.invocations}u) {
    var e = es[8u * sb];
    for (var j = 1u; j < 8u; j++) {
      let f = es[8u * sb + j];
      if (f.x > e.x) { e = f; }
    }
    tops[sb] = e.y;
  }
  workgroupBarrier();
  for (var blk = lid; blk < ${l.Ks / 32}u; blk += ${l.invocations}u) {
    let top = tops[blk / 8u];
    let iscale = select(0.0, -127.0 / top, top != 0.0);
    let d = select(0.0, 1.0 / iscale, top != 0.0);
    var sum = 0i;
    var q: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
      let r = min(vec4<i32>(round(${fourAt("blk * 32u + 4u * i")} * iscale)), vec4<i32>(127));
      sum += r.x + r.y + r.z + r.w;
      q[i] = pack4xI8(r);
    }
${storeBlock(l)}
  }`
