/**
 * Op builders: gated linear units.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { ShapeError } from "../../GpuError.js"
import type { GluKind } from "../../Op.js"
import { Op } from "../../Op.js"
import type { TensorLike } from "../../Tensor.js"
import * as Tensor from "../../Tensor.js"
import { requireContiguousRows, requireFloat } from "./checks.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

/** @internal */
export const glu = (
  a: TensorLike,
  kind: GluKind,
  options?: { readonly gate?: TensorLike | undefined; readonly swapped?: boolean }
): Built => {
  const swapped = options?.swapped ?? false
  if (kind !== "swiglu" && kind !== "geglu") {
    return Tensor.lift1((a: Tensor.Tensor) => Tensor.fail("glu", [a], `unknown kind ${kind}`))(a)
  }
  if (options?.gate === undefined) {
    return Tensor.lift1((a: Tensor.Tensor) => {
      requireFloat("glu", a)
      requireContiguousRows("glu", a)
      if (a.ne[0] % 2 !== 0) Tensor.fail("glu", [a], "a single-tensor glu needs an even ne[0]")
      return Tensor.unsafeMake("", a.dtype, [a.ne[0] / 2, a.ne[1], a.ne[2], a.ne[3]], Op.Glu({ kind, swapped }), [a])
    })(a)
  }
  return Tensor.lift2((a: Tensor.Tensor, g: Tensor.Tensor) => {
    requireFloat("glu", a, g)
    requireContiguousRows("glu", a)
    requireContiguousRows("glu", g)
    if (!Tensor.sameShape(a, g) || a.dtype !== g.dtype) {
      Tensor.fail("glu", [a, g], "a and gate need the same shape and type")
    }
    return Tensor.unsafeMake("", a.dtype, a.ne, Op.Glu({ kind, swapped }), [a, g])
  })(a, options.gate)
}

/** @internal */
export const swiglu = (a: TensorLike, gate?: TensorLike): Built => glu(a, "swiglu", { gate })

/** @internal */
export const geglu = (a: TensorLike, gate?: TensorLike): Built => glu(a, "geglu", { gate })
