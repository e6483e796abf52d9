/**
 * Indexing cases: get_rows (plain, batched, 4-D) and set_rows (plain, batched with broadcast indices,
 * long rows) into a destination of every float type.
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as Ops from "@effect-gpu/core/Ops"
import type { Case, Row } from "./case.js"
import { table } from "./case.js"

const getRows = (dt: DType.DType): ReadonlyArray<Row> => [
  ["plain", [{ dtype: dt, ne: [14, 11] }, { dtype: "i32", ne: [6], index: 11 }], ([a, i]) => Ops.getRows(a, i)],
  ["batched", [{ dtype: dt, ne: [9, 7, 2] }, { dtype: "i32", ne: [5, 2], index: 7 }], ([a, i]) => Ops.getRows(a, i)],
  ["4d", [{ dtype: dt, ne: [33, 4, 2, 2] }, { dtype: "i32", ne: [3, 2, 2], index: 4 }], ([a, i]) => Ops.getRows(a, i)]
]

const setRows = (dt: DType.DType): ReadonlyArray<Row> => [
  [
    "plain",
    [{ dtype: dt, ne: [14, 9] }, { dtype: "f32", ne: [14, 4] }, { dtype: "i32", ne: [4], distinct: 9 }],
    ([d, s, i]) => Ops.setRows(d, s, i)
  ],
  [
    "batched",
    [{ dtype: dt, ne: [8, 6, 2] }, { dtype: "f32", ne: [8, 3, 2] }, { dtype: "i32", ne: [3, 1], distinct: 6 }],
    ([d, s, i]) => Ops.setRows(d, s, i)
  ],
  [
    "long",
    [{ dtype: dt, ne: [33, 10] }, { dtype: "f32", ne: [33, 7] }, { dtype: "i32", ne: [7], distinct: 10 }],
    ([d, s, i]) => Ops.setRows(d, s, i)
  ]
]

/** @internal */
export const cases = (dt: DType.DType): Array<Case> => [
  ...table(`get_rows_${dt}`, "get_rows", getRows(dt)),
  ...table(`set_rows_${dt}`, "set_rows", setRows(dt))
]
