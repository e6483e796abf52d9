/**
 * Op builders: copies.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import * as DType from "../../DType.js"
import type { ShapeError } from "../../GpuError.js"
import { Op } from "../../Op.js"
import type { TensorLike } from "../../Tensor.js"
import * as Tensor from "../../Tensor.js"
import { isFloat } from "./checks.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

/** @internal */
export const cpy = (a: TensorLike, dtype: DType.DType): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (!DType.isDType(dtype) || !DType.isComputable(dtype)) Tensor.fail("cpy", [a], `cannot convert to ${dtype}`)
    if (a.dtype !== dtype && !(isFloat(a) && (dtype === "f32" || dtype === "f16"))) {
      Tensor.fail("cpy", [a], `cannot convert ${a.dtype} to ${dtype}`)
    }
    return Tensor.unsafeMake("", dtype, a.ne, Op.Cpy({ dtype }), [a])
  })(a)

/** @internal */
export const dup = (a: TensorLike): Built =>
  Tensor.lift1((a: Tensor.Tensor) => Tensor.unsafeMake("", a.dtype, a.ne, Op.Cpy({ dtype: a.dtype }), [a]))(a)

/** @internal */
export const cont: (a: TensorLike) => Built = Tensor.cont
