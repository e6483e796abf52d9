/**
 * Op builders: rows.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import * as DType from "../../DType.js"
import type { ShapeError } from "../../GpuError.js"
import { Op } from "../../Op.js"
import type { TensorLike } from "../../Tensor.js"
import * as Tensor from "../../Tensor.js"
import { requireContiguousRows } from "./checks.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

/** @internal */
export const getRows: (a: TensorLike, idx: TensorLike) => Built = Tensor.lift2((a, idx) => {
  if (idx.dtype !== "i32") Tensor.fail("get_rows", [a, idx], "indices must be i32")
  if (DType.isQuantized(a.dtype) && !Tensor.hasContiguousRows(a)) {
    Tensor.fail("get_rows", [a, idx], `${a.dtype} rows must be contiguous blocks`)
  }
  if (a.ne[2] !== idx.ne[1] || a.ne[3] !== idx.ne[2] || idx.ne[3] !== 1) {
    Tensor.fail("get_rows", [a, idx], "indices must be [n, a.ne[2], a.ne[3]]")
  }
  requireContiguousRows("get_rows", a)
  return Tensor.unsafeMake(
    "",
    a.dtype === "i32" ? "i32" : "f32",
    [a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]],
    Op.GetRows(),
    [
      a,
      idx
    ]
  )
})

/** @internal */
export const setRows: (dst: TensorLike, src: TensorLike, idx: TensorLike) => Built = Tensor.lift3(
  (d: Tensor.Tensor, s: Tensor.Tensor, i: Tensor.Tensor) => {
    if (i.dtype !== "i32") Tensor.fail("set_rows", [d, s, i], "indices must be i32")
    if (s.dtype !== "f32" && s.dtype !== "f16") Tensor.fail("set_rows", [d, s, i], "src must be f32 or f16")
    if (d.dtype !== "f32" && d.dtype !== "f16") Tensor.fail("set_rows", [d, s, i], "dst must be f32 or f16")
    if (d.ne[0] !== s.ne[0] || d.ne[2] !== s.ne[2] || d.ne[3] !== s.ne[3]) {
      Tensor.fail("set_rows", [d, s, i], "dst and src need the same ne[0], ne[2], ne[3]")
    }
    if (s.ne[1] !== i.ne[0] || s.ne[2] % i.ne[1] !== 0 || s.ne[3] % i.ne[2] !== 0 || i.ne[3] !== 1) {
      Tensor.fail("set_rows", [d, s, i], "indices must be [src.ne[1], a divisor of src.ne[2], a divisor of src.ne[3]]")
    }
    requireContiguousRows("set_rows", d)
    requireContiguousRows("set_rows", s)
    return Tensor.unsafeView(d, d.ne, d.nb, 0, Op.SetRows(), [d, s, i])
  }
)
