/**
 * Matrix-product reference kernels: mul_mat over any weight type, with activations rounded as ggml's CPU
 * rounds them for that type (f16 for f16 weights; q8_0 blocks for q4_0, q4_1, q5_0 and q8_0; q8_K blocks
 * for the k-quants), mul_mat_id over chosen experts, and add_id. Dot products accumulate in f64.
 *
 * @internal
 */
import * as Float16 from "../../Float16.js"
import * as Op from "../../Op.js"
import * as Tensor from "../../Tensor.js"
import { dequantize, nearestInt, quantize } from "../quant.js"
import { Acc, memoryOf } from "./acc.js"

/** x through ggml's q8_K (blocks of 256, an f32 scale from the value of largest magnitude), back to values */
const roundQ8K = (x: Float64Array) => {
  for (let at = 0; at + 256 <= x.length; at += 256) {
    let amax = 0
    let max = 0
    for (let j = 0; j < 256; j++) {
      const v = Math.fround(x[at + j])
      if (Math.abs(v) > amax) {
        amax = Math.abs(v)
        max = v
      }
    }
    if (amax === 0) {
      x.fill(0, at, at + 256)
      continue
    }
    const iscale = Math.fround(-127 / max)
    const d = Math.fround(1 / iscale)
    for (let j = 0; j < 256; j++) {
      const q = Math.min(127, nearestInt(iscale * Math.fround(x[at + j])))
      x[at + j] = q * d
    }
  }
}

/** b's rows as ggml's CPU multiplies them with `a`'s type (its vec_dot_type) */
const columnOf = (a: Acc, b: Acc, j: number, i2: number, i3: number, out: Float64Array) => {
  b.row(j, i2, i3, out)
  const type = a.t.dtype
  if (type === "f16") {
    for (let k = 0; k < out.length; k++) out[k] = Float16.round(out[k])
  } else if (type === "q4_K" || type === "q6_K") {
    roundQ8K(out)
  } else if (type === "q8_0" || type === "q4_0" || type === "q4_1" || type === "q5_0") {
    if (out.length % 32 === 0) out.set(dequantize("q8_0", quantize("q8_0", Float32Array.from(out)), out.length / 32))
  }
  return out
}

const dot = (x: Float64Array, y: Float64Array): number => {
  let s = 0
  for (let k = 0; k < x.length; k++) s += x[k] * y[k]
  return s
}

/**
 * @internal: a contiguous f32 tensor of `t`'s shape (`rows` rows) in memory of its own: a fused product's
 * second result, or one part of stacked products
 */
export const scratchLike = (t: Tensor.Tensor, rows = t.ne[0]): Acc => {
  const s = Tensor.unsafeMake(`${t.name}.scratch`, "f32", [rows, t.ne[1], t.ne[2], t.ne[3]], Op.Op.None(), [])
  return new Acc(s, memoryOf(new Uint8Array(Tensor.nbytes(s))), 0)
}

/** @internal: a contiguous f32 scratch of shape `ne` */
export const scratchOf = (name: string, ne: readonly [number, number, number, number]): Acc => {
  const s = Tensor.unsafeMake(`${name}.scratch`, "f32", ne, Op.Op.None(), [])
  return new Acc(s, memoryOf(new Uint8Array(Tensor.nbytes(s))), 0)
}

/** @internal: a contiguous `a` seen with another shape of as many elements (a reshape) */
export const reshaped = (a: Acc, ne: readonly [number, number, number, number]): Acc =>
  new Acc(Tensor.unsafeMake(a.t.name, a.t.dtype, ne, Op.Op.None(), []), a.mem, a.base)

/** @internal: `a` with its dimensions 1 and 2 swapped (a permute's view: the same memory) */
export const swapped12 = (a: Acc): Acc =>
  new Acc(
    Tensor.unsafeView(a.t, [a.ne0, a.ne2, a.ne1, a.ne3], [a.nb0, a.nb2, a.nb1, a.nb3], 0, Op.Op.View(), [a.t]),
    a.mem,
    a.base
  )

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
