/**
 * The reference of fused attention (flash_attn_ext), in f64: for each query and head, scores against
 * every key of the head's KV group, an optional soft cap, the mask with its ALiBi slope, a softmax that a
 * sink may join, and the weighted sum of the values. The result is [D, H, n_q].
 *
 * @internal
 */
import type { Acc } from "./acc.js"
import { alibiSlope } from "./acc.js"

/** @internal */
export const flashAttnExt = (
  dst: Acc,
  q: Acc,
  k: Acc,
  v: Acc,
  mask: Acc | undefined,
  sinks: Acc | undefined,
  options: { readonly scale: number; readonly maxBias: number; readonly logitSoftcap: number }
): void => {
  const [D, nQ, H, B] = [q.ne0, q.ne1, q.ne2, q.ne3]
  const nKv = k.ne1
  const groups = H / k.ne2
  const qrow = new Float64Array(D)
  const krow = new Float64Array(D)
  const scores = new Float64Array(nKv)
  const out = new Float64Array(v.ne0)
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / groups)
      const slope = alibiSlope(options.maxBias, h, H)
      const sink = sinks === undefined ? undefined : sinks.get(h, 0, 0, 0)
      for (let i = 0; i < nQ; i++) {
        q.row(i, h, b, qrow)
        let max = sink ?? -Infinity
        for (let j = 0; j < nKv; j++) {
          k.row(j, g, b % k.ne3, krow)
          let s = 0
          for (let d = 0; d < D; d++) s += qrow[d] * krow[d]
          s *= options.scale
          if (options.logitSoftcap !== 0) s = options.logitSoftcap * Math.tanh(s / options.logitSoftcap)
          if (mask) s += slope * mask.get(j, i, h % mask.ne2, b % mask.ne3)
          scores[j] = s
          if (s > max) max = s
        }
        let sum = sink === undefined || max === -Infinity ? 0 : Math.exp(sink - max)
        out.fill(0)
        for (let j = 0; j < nKv; j++) {
          const p = scores[j] === -Infinity ? 0 : Math.exp(scores[j] - max)
          sum += p
          if (p === 0) continue
          for (let d = 0; d < v.ne0; d++) out[d] += p * v.get(d, j, g, b % v.ne3)
        }
        for (let d = 0; d < v.ne0; d++) dst.set(d, h, i, b, sum === 0 ? 0 : out[d] / sum)
      }
    }
  }
}
