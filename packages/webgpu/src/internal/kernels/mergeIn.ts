/**
 * A decoding step's attention merged by the product that reads it: where attention's decode form splits
 * the keys (each split's max, sum and output row in scratch after the result, merged by a second dispatch)
 * and its one reader is a product of one column (a layer's output projection; the int8 form, or f16
 * weights by subgroups, which stage the merged row in workgroup memory), each of that product's workgroups
 * weighs the splits itself as it reads its activations, and the merge's dispatch goes. Each workgroup then reads every split's rows (the splits times the attention's output, from L2)
 * where it read the merged output once.
 *
 * @internal
 */
import * as Tensor from "@effect-gpu/core/Tensor"
import { decodePlan } from "./attentionDecode.js"
import type { KernelTarget } from "./kernel.js"
import type { MadeB } from "./product.js"

/** the most weights (heads x splits) a workgroup keeps */
const MOST_WEIGHTS = 2048
/**
 * the most splits merged in the product: each of its workgroups reads every split's rows, so many splits (a
 * long cache: 32 at 4096 keys) would read the product's weights' bytes several times over from L2
 */
const MOST_SPLITS = 8
/**
 * the longest attention output merged in its product by default: a 1B model's (32 heads of 64); at an 8B
 * model's 4096 each workgroup's reads of the splits' rows cost more than the merge's dispatch, where at
 * 2048 they gained (benchmarks/RESULTS.md, tried and not taken: decode attention)
 */
const DEFAULT_MOST = 2048

/**
 * @internal: the merge of `attention`'s split partials as the product reading its result can make it, or
 * undefined where it cannot or is not asked to: one query row of the decode form with its keys split, no
 * sinks, at most MOST_SPLITS splits, an output of at most DEFAULT_MOST values unless asked
 * (`mergesInProducts`), value rows of whole fours and an even count of partials (their output rows at whole
 * vec4s)
 */
export const mergeBefore = (attention: Tensor.Tensor, target: KernelTarget): MadeB | undefined => {
  const op = attention.op
  if ((op._tag !== "FlashAttnExt" && op._tag !== "RopeFlashAttnExt") || op.hasSinks) return undefined
  const plan = decodePlan(attention, target)
  const [q, , v] = attention.src
  if (plan === undefined || plan.splits < 2 || q.ne[1] !== 1 || q.ne[3] !== 1) return undefined
  const H = q.ne[2]
  const S = plan.splits
  const Dv = v.ne[0]
  const most = target.mergesInProducts === true ? Infinity : target.mergesInProducts === false ? 0 : DEFAULT_MOST
  if (
    H * Dv > most || S > MOST_SPLITS || Dv % 4 !== 0 || (H * S) % 2 !== 0 || H * S > MOST_WEIGHTS ||
    attention.dtype !== "f32"
  ) {
    return undefined
  }
  // the partials (in elements from the result's first): each head's splits' max and sum, then their rows
  const scratch = Tensor.nelements(attention)
  const rows = scratch + 2 * H * S
  const extent = Tensor.nbytes(attention) + 4 * H * S * (Dv + 2)
  const at = (t: string, s: string) => `ld_ma(P.ma_o + ${scratch}u + (${t} * ${S}u + ${s}) * 2u)`
  return {
    operands: [{ name: "ma", tensor: attention, extent }],
    params: [],
    workgroupBytes: () => 4 * H * S,
    decls: () =>
      `var<workgroup> mw: array<f32, ${H * S}>;
/** the merged output's four values from element k (head k / Dv): the splits' rows weighed */
fn merged4(k: u32) -> vec4<f32> {
  let h = k / ${Dv}u;
  let e = k % ${Dv}u;
  var o = vec4<f32>(0.0);
  for (var s = 0u; s < ${S}u; s++) {
    o += ld4_ma((P.ma_o + ${rows}u + (h * ${S}u + s) * ${Dv}u + e) >> 2u) * mw[h * ${S}u + s];
  }
  return o;
}`,
    // each head's splits weighed as the merge weighs them: e^(max_s - max) over the sum
    prologue: (n) =>
      `  for (var t = lid; t < ${H}u; t += ${n}u) {
    var m = neg_inf();
    for (var s = 0u; s < ${S}u; s++) { m = max(m, ${at("t", "s")}); }
    var l = 0.0;
    for (var s = 0u; s < ${S}u; s++) {
      let ms = ${at("t", "s")};
      let w = select(0.0, exp(ms - m), ms > neg_inf());
      mw[t * ${S}u + s] = w;
      l += ld_ma(P.ma_o + ${scratch}u + (t * ${S}u + s) * 2u + 1u) * w;
    }
    for (var s = 0u; s < ${S}u; s++) { mw[t * ${S}u + s] = select(0.0, mw[t * ${S}u + s] / l, l > 0.0); }
  }
  workgroupBarrier();`,
    fourAt: (k) => `merged4(${k})`,
    variant: { merge: `${H}x${S}x${Dv}` }
  }
}
