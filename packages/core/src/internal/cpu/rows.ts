/**
 * Row reference kernels: soft_max (mask, ALiBi, sinks), the norms (rms, plain, L2, group), and the
 * reductions and sorts along rows. Accumulated in f64.
 *
 * @internal
 */
import type { Acc } from "./acc.js"
import { alibiSlope, each, eachRow } from "./acc.js"

/** @internal: softmax(a * scale + slope * mask) per row; a sink joins the max and the denominator */
export const softMax = (
  dst: Acc,
  a: Acc,
  mask: Acc | undefined,
  sinks: Acc | undefined,
  scale: number,
  maxBias: number
): void => {
  const w = new Float64Array(a.ne0)
  return eachRow(a, (i1, i2, i3) => {
    const slope = alibiSlope(maxBias, i2, a.ne2)
    let max = -Infinity
    for (let i = 0; i < a.ne0; i++) {
      let v = a.get(i, i1, i2, i3) * scale
      if (mask) v += slope * mask.get(i, i1, i2 % mask.ne2, i3 % mask.ne3)
      w[i] = v
      if (v > max) max = v
    }
    const sink = sinks === undefined ? undefined : sinks.get(i2, 0, 0, 0)
    if (sink !== undefined && sink > max) max = sink
    let sum = sink === undefined ? 0 : Math.exp(sink - max)
    for (let i = 0; i < a.ne0; i++) {
      w[i] = Math.exp(w[i] - max)
      sum += w[i]
    }
    for (let i = 0; i < a.ne0; i++) dst.set(i, i1, i2, i3, w[i] / sum)
  })
}

/** @internal: x / sqrt(mean(x^2) + eps) per row */
export const rmsNorm = (dst: Acc, a: Acc, eps: number): void =>
  eachRow(a, (i1, i2, i3) => {
    const x = a.row(i1, i2, i3)
    let s = 0
    for (let i = 0; i < x.length; i++) s += x[i] * x[i]
    const scale = 1 / Math.sqrt(s / x.length + eps)
    for (let i = 0; i < x.length; i++) dst.set(i, i1, i2, i3, x[i] * scale)
  })

/** @internal: (x - mean) / sqrt(var + eps) per row */
export const norm = (dst: Acc, a: Acc, eps: number): void =>
  eachRow(a, (i1, i2, i3) => {
    const x = a.row(i1, i2, i3)
    let mean = 0
    for (let i = 0; i < x.length; i++) mean += x[i]
    mean /= x.length
    let v = 0
    for (let i = 0; i < x.length; i++) v += (x[i] - mean) * (x[i] - mean)
    const scale = 1 / Math.sqrt(v / x.length + eps)
    for (let i = 0; i < x.length; i++) dst.set(i, i1, i2, i3, (x[i] - mean) * scale)
  })

/** @internal: x / max(sqrt(sum x^2), eps) per row */
export const l2Norm = (dst: Acc, a: Acc, eps: number): void =>
  eachRow(a, (i1, i2, i3) => {
    const x = a.row(i1, i2, i3)
    let s = 0
    for (let i = 0; i < x.length; i++) s += x[i] * x[i]
    const scale = 1 / Math.max(Math.sqrt(s), eps)
    for (let i = 0; i < x.length; i++) dst.set(i, i1, i2, i3, x[i] * scale)
  })

/**
 * @internal: channels (dimension 2) in groups of ceil(ne2 / nGroups), the last one smaller; each group's
 * mean and biased variance over ne0 x ne1 x its channels, per i3
 */
export const groupNorm = (dst: Acc, a: Acc, nGroups: number, eps: number): void => {
  const perGroup = Math.ceil(a.ne2 / nGroups)
  for (let i3 = 0; i3 < a.ne3; i3++) {
    for (let c0 = 0; c0 < a.ne2; c0 += perGroup) {
      const c1 = Math.min(c0 + perGroup, a.ne2)
      let sum = 0
      let n = 0
      for (let i2 = c0; i2 < c1; i2++) {
        for (let i1 = 0; i1 < a.ne1; i1++) for (let i0 = 0; i0 < a.ne0; i0++) sum += a.get(i0, i1, i2, i3)
      }
      n = (c1 - c0) * a.ne1 * a.ne0
      const mean = sum / n
      let v = 0
      for (let i2 = c0; i2 < c1; i2++) {
        for (let i1 = 0; i1 < a.ne1; i1++) {
          for (let i0 = 0; i0 < a.ne0; i0++) v += (a.get(i0, i1, i2, i3) - mean) ** 2
        }
      }
      const scale = 1 / Math.sqrt(v / n + eps)
      for (let i2 = c0; i2 < c1; i2++) {
        for (let i1 = 0; i1 < a.ne1; i1++) {
          for (let i0 = 0; i0 < a.ne0; i0++) dst.set(i0, i1, i2, i3, (a.get(i0, i1, i2, i3) - mean) * scale)
        }
      }
    }
  }
}

/** @internal: the sum (or mean) of each row */
export const sumRows = (dst: Acc, a: Acc, mean: boolean): void =>
  eachRow(a, (i1, i2, i3) => {
    let s = 0
    for (let i = 0; i < a.ne0; i++) s += a.get(i, i1, i2, i3)
    dst.set(0, i1, i2, i3, mean ? s / a.ne0 : s)
  })

/** @internal: the sum of all elements */
export const sum = (dst: Acc, a: Acc): void => {
  let s = 0
  each(a, (i0, i1, i2, i3) => {
    s += a.get(i0, i1, i2, i3)
  })
  dst.set(0, 0, 0, 0, s)
}

/** @internal: the running sum along each row */
export const cumsum = (dst: Acc, a: Acc): void =>
  eachRow(a, (i1, i2, i3) => {
    let s = 0
    for (let i = 0; i < a.ne0; i++) {
      s += a.get(i, i1, i2, i3)
      dst.set(i, i1, i2, i3, s)
    }
  })

/** @internal: the index of each row's largest element (the first of equals) */
export const argmax = (dst: Acc, a: Acc): void => {
  for (let i1 = 0; i1 < a.ne1; i1++) {
    let best = 0
    let max = -Infinity
    for (let i = 0; i < a.ne0; i++) {
      const v = a.get(i, i1, 0, 0)
      if (v > max) {
        max = v
        best = i
      }
    }
    dst.set(i1, 0, 0, 0, best)
  }
}

/** @internal: the indices that sort each row (ties by index); top_k keeps the first dst.ne0 */
export const sortIndices = (dst: Acc, a: Acc, desc: boolean): void =>
  eachRow(a, (i1, i2, i3) => {
    const x = a.row(i1, i2, i3)
    const order = Array.from({ length: a.ne0 }, (_, i) => i)
    order.sort((p, q) => (desc ? x[q] - x[p] : x[p] - x[q]) || p - q)
    for (let i = 0; i < dst.ne0; i++) dst.set(i, i1, i2, i3, order[i])
  })
