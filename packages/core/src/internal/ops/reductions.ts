/**
 * Op builders: reductions and sorting.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { ShapeError } from "../../GpuError.js"
import { Op } from "../../Op.js"
import type { Shape, TensorLike } from "../../Tensor.js"
import * as Tensor from "../../Tensor.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

const reduce = (op: Op, name: string, shape: (a: Tensor.Tensor) => Shape) =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (a.dtype !== "f32") Tensor.fail(name, [a], "expects f32")
    return Tensor.unsafeMake("", "f32", shape(a), op, [a])
  })

/** @internal */
export const sumRows: (a: TensorLike) => Built = reduce(Op.SumRows(), "sum_rows", (a) => [1, a.ne[1], a.ne[2], a.ne[3]])

/** @internal */
export const sum: (a: TensorLike) => Built = reduce(Op.Sum(), "sum", () => [1, 1, 1, 1])

/** @internal */
export const mean: (a: TensorLike) => Built = reduce(Op.Mean(), "mean", (a) => [1, a.ne[1], a.ne[2], a.ne[3]])

/** @internal */
export const cumsum: (a: TensorLike) => Built = reduce(Op.Cumsum(), "cumsum", (a) => a.ne)

/** @internal */
export const argmax: (a: TensorLike) => Built = Tensor.lift1((a) => {
  if (a.dtype !== "f32") Tensor.fail("argmax", [a], "expects f32")
  if (a.ne[2] !== 1 || a.ne[3] !== 1) Tensor.fail("argmax", [a], "expects a matrix (ne[2] = ne[3] = 1)")
  return Tensor.unsafeMake("", "i32", [a.ne[1], 1, 1, 1], Op.Argmax(), [a])
})

/** @internal */
export const argsort = (a: TensorLike, order: "asc" | "desc" = "asc"): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (a.dtype !== "f32") Tensor.fail("argsort", [a], "expects f32")
    if (order !== "asc" && order !== "desc") Tensor.fail("argsort", [a], `order ${order} is not asc or desc`)
    return Tensor.unsafeMake("", "i32", a.ne, Op.Argsort({ order }), [a])
  })(a)

/** @internal */
export const topK = (a: TensorLike, k: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (a.dtype !== "f32") Tensor.fail("top_k", [a], "expects f32")
    if (!Number.isInteger(k) || k < 1 || k > a.ne[0]) Tensor.fail("top_k", [a], `k = ${k} must be in [1, ne[0]]`)
    return Tensor.unsafeMake("", "i32", [k, a.ne[1], a.ne[2], a.ne[3]], Op.TopK({ k }), [a])
  })(a)
