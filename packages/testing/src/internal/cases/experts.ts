/**
 * Mixture-of-experts cases: mul_mat_id with experts of the float types and of quantized ones (a b row
 * per chosen expert, or one shared by them; a matrix-vector-sized and a wider expert), and add_id.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import * as Ops from "@effect-gpu/core/Ops"
import type { Case, Row } from "./case.js"
import { table, THRESHOLD } from "./case.js"

const mulMatId = (dt: DType.DType): ReadonlyArray<Row> => {
  const K = DType.blockSize(dt) === 256 ? 256 : 64
  const experts = (M: number, b1: number, tokens: number) => [
    { dtype: dt, ne: [K, M, 5] },
    { dtype: "f32" as const, ne: [K, b1, tokens] },
    { dtype: "i32" as const, ne: [2, tokens], index: 5 }
  ]
  return [
    ["per_expert_b", experts(19, 2, 3), ([as, b, ids]) => Ops.mulMatId(as, b, ids)],
    ["shared_b", experts(19, 1, 3), ([as, b, ids]) => Ops.mulMatId(as, b, ids)],
    ["wide", experts(70, 2, 1), ([as, b, ids]) => Ops.mulMatId(as, b, ids)]
  ]
}

const ADD_ID: ReadonlyArray<Row> = [
  [
    "",
    [{ dtype: "f32", ne: [20, 2, 3] }, { dtype: "f32", ne: [20, 5] }, { dtype: "i32", ne: [2, 3], index: 5 }],
    ([a, b, ids]) => Ops.addId(a, b, ids)
  ]
]

/** @internal: experts of each float type offered, then of the quantized types */
export const cases = (floats: ReadonlyArray<DType.DType>): Array<Case> => [
  ...[...floats, ...DType.quantized].flatMap((dt) =>
    table(`mul_mat_id_${dt}`, "mul_mat_id", mulMatId(dt), THRESHOLD.mulMat)
  ),
  ...table("add_id_f32", "add_id", ADD_ID).map((c) => ({ ...c, name: "add_id_f32" }))
]
