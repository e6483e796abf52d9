/**
 * The checks op builders share.
 *
 * @internal
 */
import * as Tensor from "../../Tensor.js"

/** @internal */
export const isFloat = (t: Tensor.Tensor): boolean => t.dtype === "f32" || t.dtype === "f16"

/** @internal */
export const requireFloat = (op: string, ...ts: Array<Tensor.Tensor>): void => {
  for (const t of ts) {
    if (!isFloat(t)) Tensor.fail(op, ts, `expects f32 or f16 operands, got ${t.dtype}`)
  }
}

/** @internal */
export const requireContiguousRows = (op: string, t: Tensor.Tensor): void => {
  if (!Tensor.hasContiguousRows(t)) Tensor.fail(op, [t], "expects rows (dimension 0) to be contiguous")
}
