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
    if (!DType.isDType(dtype)) Tensor.fail("cpy", [a], `cannot convert to ${dtype}`)
    // f32 and f16 convert both ways; f32 quantizes to q8_0 and q4_0; every quantized type dequantizes to f32
    const floats = isFloat(a) && (dtype === "f32" || dtype === "f16")
    const quantizes = a.dtype === "f32" && (dtype === "q8_0" || dtype === "q4_0")
    const dequantizes = DType.isQuantized(a.dtype) && dtype === "f32"
    if (a.dtype !== dtype && !floats && !quantizes && !dequantizes) {
      Tensor.fail("cpy", [a], `cannot convert ${a.dtype} to ${dtype}`)
    }
    if (DType.isQuantized(a.dtype) || DType.isQuantized(dtype)) {
      if (!Tensor.hasContiguousRows(a)) Tensor.fail("cpy", [a], "quantized copies need contiguous rows")
      if (a.ne[0] % DType.blockSize(dtype) !== 0) {
        Tensor.fail("cpy", [a], `rows of ${a.ne[0]} are not whole ${dtype} blocks of ${DType.blockSize(dtype)}`)
      }
    }
    return Tensor.unsafeMake("", dtype, a.ne, Op.Cpy({ dtype }), [a])
  })(a)

/** @internal */
export const dup = (a: TensorLike): Built =>
  Tensor.lift1((a: Tensor.Tensor) => Tensor.unsafeMake("", a.dtype, a.ne, Op.Cpy({ dtype: a.dtype }), [a]))(a)

/** @internal */
export const cont: (a: TensorLike) => Built = Tensor.cont
