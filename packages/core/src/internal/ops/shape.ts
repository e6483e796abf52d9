/**
 * Op builders: shape.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { ShapeError } from "../../GpuError.js"
import { Op } from "../../Op.js"
import type { TensorLike } from "../../Tensor.js"
import * as Tensor from "../../Tensor.js"
import { requireFloat } from "./checks.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

/** @internal */
export const concat = (a: TensorLike, b: TensorLike, dim: number): Built =>
  Tensor.lift2((a: Tensor.Tensor, b: Tensor.Tensor) => {
    if (!Number.isInteger(dim) || dim < 0 || dim > 3) Tensor.fail("concat", [a, b], `dim ${dim} is not in [0, 3]`)
    if (a.dtype !== b.dtype) Tensor.fail("concat", [a, b], "operands need the same dtype")
    for (let i = 0; i < 4; i++) {
      if (i !== dim && a.ne[i] !== b.ne[i]) Tensor.fail("concat", [a, b], `dimension ${i} differs`)
    }
    const ne = [...a.ne] as unknown as [number, number, number, number]
    ne[dim] = a.ne[dim] + b.ne[dim]
    return Tensor.unsafeMake("", a.dtype, ne, Op.Concat({ dim }), [a, b])
  })(a, b)

/** @internal */
export const pad = (a: TensorLike, p: readonly [number, number, number, number]): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (a.dtype !== "f32") Tensor.fail("pad", [a], "expects f32")
    if (p.length !== 4 || p.some((x) => !Number.isInteger(x) || x < 0)) {
      Tensor.fail("pad", [a], "padding is 4 non-negative integers")
    }
    return Tensor.unsafeMake(
      "",
      a.dtype,
      [a.ne[0] + p[0], a.ne[1] + p[1], a.ne[2] + p[2], a.ne[3] + p[3]],
      Op.Pad({ p: [p[0], p[1], p[2], p[3]] }),
      [a]
    )
  })(a)

/** @internal */
export const repeat: (a: TensorLike, shape: TensorLike) => Built = Tensor.lift2((a, shape) => {
  if (!Tensor.canRepeat(a, shape)) {
    Tensor.fail("repeat", [a, shape], "each dimension of the target must be a multiple of a's")
  }
  return Tensor.unsafeMake("", a.dtype, shape.ne, Op.Repeat(), [a, shape])
})

/** @internal */
export const diagMaskInf = (a: TensorLike, nPast: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    requireFloat("diag_mask_inf", a)
    if (!Number.isInteger(nPast) || nPast < 0) Tensor.fail("diag_mask_inf", [a], `n_past ${nPast} must be >= 0`)
    return Tensor.unsafeMake("", a.dtype, a.ne, Op.DiagMaskInf({ nPast }), [a])
  })(a)
