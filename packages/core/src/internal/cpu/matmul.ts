/**
 * Matrix-product reference kernels: mul_mat over any weight type (quantized rows dequantized, f16
 * weights meeting activations rounded to f16 as ggml's CPU does), mul_mat_id over chosen experts, and
 * add_id. Dot products accumulate in f64.
 *
 * @internal
 */
import * as Float16 from "../../Float16.js"
import type { Acc } from "./acc.js"

/** b's rows as ggml's CPU multiplies them with `a`'s type: f16 weights meet activations rounded to f16 */
const columnOf = (a: Acc, b: Acc, j: number, i2: number, i3: number, out: Float64Array) => {
  b.row(j, i2, i3, out)
  if (a.t.dtype === "f16") { for (let k = 0; k < out.length; k++) out[k] = Float16.round(out[k]) }
  return out
}

const dot = (x: Float64Array, y: Float64Array): number => {
  let s = 0
  for (let k = 0; k < x.length; k++) s += x[k] * y[k]
  return s
}

/** @internal: dst[i, j] = a's row i . b's row j per batch, a's batches broadcast over b's */
export const mulMat = (dst: Acc, a: Acc, b: Acc): void => {
  const K = a.ne0
  const r2 = b.ne2 / a.ne2
  const r3 = b.ne3 / a.ne3
  const arow = new Float64Array(K)
  for (let i3 = 0; i3 < dst.ne3; i3++) {
    for (let i2 = 0; i2 < dst.ne2; i2++) {
      const a2 = Math.floor(i2 / r2)
      const a3 = Math.floor(i3 / r3)
      const columns = Array.from({ length: dst.ne1 }, (_, j) => columnOf(a, b, j, i2, i3, new Float64Array(K)))
      for (let i = 0; i < dst.ne0; i++) {
        a.row(i, a2, a3, arow)
        for (let j = 0; j < dst.ne1; j++) dst.set(i, j, i2, i3, dot(arow, columns[j]))
      }
    }
  }
}

/** @internal: dst[:, e, t] = as[:, :, ids[e, t]]^T . b[:, e % b1, t] */
export const mulMatId = (dst: Acc, as: Acc, b: Acc, ids: Acc): void => {
  const K = as.ne0
  const arow = new Float64Array(K)
  const column = new Float64Array(K)
  for (let t = 0; t < ids.ne1; t++) {
    for (let e = 0; e < ids.ne0; e++) {
      const expert = ids.get(e, t, 0, 0)
      columnOf(as, b, e % b.ne1, t, 0, column)
      for (let i = 0; i < dst.ne0; i++) {
        // an expert outside the table (computed on the device) gives zeros, as get_rows does
        const v = expert >= 0 && expert < as.ne2 ? dot(as.row(i, expert, 0, arow), column) : 0
        dst.set(i, e, t, 0, v)
      }
    }
  }
}

/** @internal: dst[:, e, t] = a[:, e, t] + b[:, ids[e, t]] */
export const addId = (dst: Acc, a: Acc, b: Acc, ids: Acc): void => {
  for (let t = 0; t < a.ne2; t++) {
    for (let e = 0; e < a.ne1; e++) {
      const r = ids.get(e, t, 0, 0)
      const inside = r >= 0 && r < b.ne1
      for (let i = 0; i < a.ne0; i++) dst.set(i, e, t, 0, a.get(i, e, t, 0) + (inside ? b.get(i, r, 0, 0) : 0))
    }
  }
}
