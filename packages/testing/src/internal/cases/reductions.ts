/**
 * Reduction and sorting cases, f32 only as in ggml: sum_rows, mean, cumsum, sum and pad on odd, long and
 * permuted shapes; argmax, argsort both ways and top_k (compared as a set per row).
 *
 * @internal
 */
import type { ShapeError } from "@effect-gpu/core/GpuError"
import * as Ops from "@effect-gpu/core/Ops"
import type { Tensor } from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type { Case } from "./case.js"
import { make } from "./case.js"

type Build = (t: Tensor) => Effect.Effect<Tensor, ShapeError>

const SHAPES: ReadonlyArray<readonly [string, ReadonlyArray<number>, Build]> = [
  ["odd", [37, 5, 2], (t) => Effect.succeed(t)],
  ["long", [1000, 3], (t) => Effect.succeed(t)],
  ["permuted", [37, 2, 5], (t) => Ops.permute(t, [0, 2, 1, 3])]
]

const REDUCTIONS: ReadonlyArray<readonly [string, Build]> = [
  ["sum_rows", Ops.sumRows],
  ["mean", Ops.mean],
  ["cumsum", Ops.cumsum],
  ["sum", Ops.sum],
  ["pad", (t) => Ops.pad(t, [3, 1, 2, 0])]
]

const ARGMAX: ReadonlyArray<readonly [string, ReadonlyArray<number>]> = [
  ["odd", [37, 5]],
  ["long", [1000, 3]],
  ["short", [3, 17]]
]

/** [suffix, shape, k of top_k] */
const SORTS: ReadonlyArray<readonly [string, ReadonlyArray<number>, number]> = [
  ["odd", [21, 5, 2], 4],
  ["long", [300, 2], 10],
  ["row", [7, 3], 7]
]

/** @internal */
export const cases = (): Array<Case> => [
  ...SHAPES.flatMap(([tag, ne, view]) =>
    REDUCTIONS.map(([op, f]) => make(`${op}_${tag}`, op, [{ dtype: "f32", ne }], ([a]) => Effect.flatMap(view(a), f)))
  ),
  ...ARGMAX.map(([tag, ne]) =>
    make(`argmax_${tag}`, "argmax", [{ dtype: "f32", ne }], ([a]) => Ops.argmax(a), 0, "exact")
  ),
  ...SORTS.flatMap(([tag, ne, k]) => [
    make(`argsort_asc_${tag}`, "argsort", [{ dtype: "f32", ne }], ([a]) => Ops.argsort(a, "asc"), 0, "exact"),
    make(`argsort_desc_${tag}`, "argsort", [{ dtype: "f32", ne }], ([a]) => Ops.argsort(a, "desc"), 0, "exact"),
    make(`top_k_${tag}`, "top_k", [{ dtype: "f32", ne }], ([a]) => Ops.topK(a, k), 0, "set_per_row")
  ])
]
