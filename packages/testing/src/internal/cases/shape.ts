/**
 * Shape cases: concat along each dimension, repeat along rows, columns and batches, the causal mask,
 * and gated linear units (halves, swapped halves, a separate gate).
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as Ops from "@effect-gpu/core/Ops"
import type { Case, Row } from "./case.js"
import { table, THRESHOLD } from "./case.js"

const concat = (dt: DType.DType): ReadonlyArray<Row> =>
  [0, 1, 2, 3].map((dim) => [
    `dim${dim}`,
    [{ dtype: dt, ne: [7, 5, 2, 2] }, { dtype: dt, ne: [7, 5, 2, 2].map((n, k) => (k === dim ? 3 : n)) }],
    ([a, b]) => Ops.concat(a, b, dim)
  ])

const repeat = (dt: DType.DType): ReadonlyArray<Row> => [
  ["rows", [{ dtype: dt, ne: [7, 1, 2, 1] }, { dtype: dt, ne: [14, 5, 2, 2] }], ([a, s]) => Ops.repeat(a, s)],
  ["cols", [{ dtype: dt, ne: [1, 3] }, { dtype: dt, ne: [4, 6, 2] }], ([a, s]) => Ops.repeat(a, s)],
  ["batch", [{ dtype: dt, ne: [5, 2] }, { dtype: dt, ne: [5, 4, 3] }], ([a, s]) => Ops.repeat(a, s)]
]

const diagMask = (dt: DType.DType): ReadonlyArray<Row> =>
  ([["a", [10, 7, 2], 3], ["b", [7, 7], 0], ["c", [20, 5, 3], 12]] as const).map(([tag, ne, nPast]) => [
    tag,
    [{ dtype: dt, ne }],
    ([a]) => Ops.diagMaskInf(a, nPast)
  ])

const glu = (dt: DType.DType, kind: "swiglu" | "geglu"): ReadonlyArray<Row> => [
  ["halves", [{ dtype: dt, ne: [28, 5, 2] }], ([a]) => Ops.glu(a, kind)],
  ["swapped", [{ dtype: dt, ne: [6, 3] }], ([a]) => Ops.glu(a, kind, { swapped: true })],
  ["split", [{ dtype: dt, ne: [13, 5, 2] }, { dtype: dt, ne: [13, 5, 2] }], ([a, b]) => Ops.glu(a, kind, { gate: b })]
]

/** @internal */
export const cases = (dt: DType.DType): Array<Case> => [
  ...table(`concat_${dt}`, "concat", concat(dt)),
  ...table(`repeat_${dt}`, "repeat", repeat(dt)),
  ...table(`diag_mask_inf_${dt}`, "diag_mask_inf", diagMask(dt), 0, "exact"),
  ...table(`glu_swiglu_${dt}`, "glu", glu(dt, "swiglu"), THRESHOLD.f16),
  ...table(`glu_geglu_${dt}`, "glu", glu(dt, "geglu"), THRESHOLD.f16)
]
