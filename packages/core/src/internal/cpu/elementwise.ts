/**
 * Element-wise reference kernels: unary and binary ops with broadcasts, conversions between types
 * (quantizing and dequantizing rows), gated units, and the shape ops that move elements (concat, pad,
 * repeat, the causal mask).
 *
 * @internal
 */
import * as DType from "../../DType.js"
import type { GluKind, UnaryKind } from "../../Op.js"
import { quantize } from "../quant.js"
import type { Acc } from "./acc.js"
import { each, eachRow } from "./acc.js"

const SQRT_2_OVER_PI = 0.7978845608028654
const GELU_COEF_A = 0.044715
const GELU_QUICK_COEF = -1.702

/** @internal */
export const gelu = (x: number): number => 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * x * (1 + GELU_COEF_A * x * x)))

/** @internal */
export const unaryFn = (kind: UnaryKind): (x: number) => number => {
  switch (kind) {
    case "relu":
      return (x) => (x > 0 ? x : 0)
    case "gelu":
      return gelu
    case "gelu_quick":
      return (x) => x * (1 / (1 + Math.exp(GELU_QUICK_COEF * x)))
    case "silu":
      return (x) => x / (1 + Math.exp(-x))
    case "tanh":
      return Math.tanh
    case "sigmoid":
      return (x) => 1 / (1 + Math.exp(-x))
    case "neg":
      return (x) => -x
    case "abs":
      return Math.abs
  }
}

/** @internal */
export const binaryFn = (tag: "Add" | "Sub" | "Mul" | "Div"): (a: number, b: number) => number => {
  switch (tag) {
    case "Add":
      return (a, b) => a + b
    case "Sub":
      return (a, b) => a - b
    case "Mul":
      return (a, b) => a * b
    case "Div":
      return (a, b) => a / b
  }
}

/** @internal: dst = f(src) element by element */
export const map = (dst: Acc, src: Acc, f: (x: number) => number): void =>
  each(dst, (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, f(src.get(i0, i1, i2, i3))))

/** @internal: dst = f(a, b), b broadcast over a */
export const binary = (dst: Acc, a: Acc, b: Acc, f: (x: number, y: number) => number): void =>
  each(
    dst,
    (i0, i1, i2, i3) =>
      dst.set(i0, i1, i2, i3, f(a.get(i0, i1, i2, i3), b.get(i0 % b.ne0, i1 % b.ne1, i2 % b.ne2, i3 % b.ne3)))
  )

/**
 * @internal: a copy into dst's type: values as they are between f32, f16 and i32; quantized rows
 * dequantized into f32; f32 rows quantized into blocks with ggml's reference quantizer
 */
export const cpy = (dst: Acc, src: Acc): void => {
  if (DType.isQuantized(dst.t.dtype) && dst.t.dtype === src.t.dtype) {
    // the same blocks: copied as they are
    return eachRow(src, (i1, i2, i3) => dst.rowBytes(i1, i2, i3).set(src.rowBytes(i1, i2, i3)))
  }
  if (DType.isQuantized(dst.t.dtype)) {
    const type = dst.t.dtype
    const row = new Float64Array(src.ne0)
    return eachRow(src, (i1, i2, i3) => {
      src.row(i1, i2, i3, row)
      dst.rowBytes(i1, i2, i3).set(quantize(type, Float32Array.from(row)))
    })
  }
  if (DType.isQuantized(src.t.dtype)) {
    const row = new Float64Array(src.ne0)
    return eachRow(src, (i1, i2, i3) => {
      src.row(i1, i2, i3, row)
      for (let i = 0; i < src.ne0; i++) dst.set(i, i1, i2, i3, row[i])
    })
  }
  return map(dst, src, (x) => x)
}

const gluAct = (kind: GluKind) => (kind === "swiglu" ? unaryFn("silu") : gelu)

/** @internal: act(x) * y over the halves of a, or of a and a gate */
export const glu = (dst: Acc, a: Acc, gate: Acc | undefined, kind: GluKind, swapped: boolean): void => {
  const act = gluAct(kind)
  if (gate !== undefined) {
    const [x, y] = swapped ? [gate, a] : [a, gate]
    return each(dst, (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, act(x.get(i0, i1, i2, i3)) * y.get(i0, i1, i2, i3)))
  }
  const n = dst.ne0
  const [ox, oy] = swapped ? [n, 0] : [0, n]
  return each(
    dst,
    (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, act(a.get(i0 + ox, i1, i2, i3)) * a.get(i0 + oy, i1, i2, i3))
  )
}

/** @internal: a and b joined along `dim` */
export const concat = (dst: Acc, a: Acc, b: Acc, dim: number): void =>
  each(dst, (i0, i1, i2, i3) => {
    const i = [i0, i1, i2, i3]
    if (i[dim] < a.t.ne[dim]) return dst.set(i0, i1, i2, i3, a.get(i0, i1, i2, i3))
    i[dim] -= a.t.ne[dim]
    dst.set(i0, i1, i2, i3, b.get(i[0], i[1], i[2], i[3]))
  })

/** @internal: zeros past a's end in every dimension */
export const pad = (dst: Acc, a: Acc): void =>
  each(dst, (i0, i1, i2, i3) => {
    const inside = i0 < a.ne0 && i1 < a.ne1 && i2 < a.ne2 && i3 < a.ne3
    dst.set(i0, i1, i2, i3, inside ? a.get(i0, i1, i2, i3) : 0)
  })

/** @internal: a tiled over dst */
export const repeat = (dst: Acc, a: Acc): void =>
  each(dst, (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, a.get(i0 % a.ne0, i1 % a.ne1, i2 % a.ne2, i3 % a.ne3)))

/** @internal: -inf where i0 > nPast + i1 */
export const diagMaskInf = (dst: Acc, a: Acc, nPast: number): void =>
  each(dst, (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, i0 > nPast + i1 ? -Infinity : a.get(i0, i1, i2, i3)))
