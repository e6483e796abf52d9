/**
 * mul_mat cases: matrix-vector (short rows, shared rows, aligned, broadcast), tiled with batch broadcast
 * and ragged edges, permuted and transposed src1; with both operands f16, the shapes that reach the
 * subgroup-matrix kernel's edges, K steps and load forms.
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as Ops from "@effect-gpu/core/Ops"
import type { Case, Row } from "./case.js"
import { table, THRESHOLD } from "./case.js"

/** src0 of `dt` and src1 of f32 */
const mixed = (dt: DType.DType): ReadonlyArray<Row> => {
  const product = (
    a: ReadonlyArray<number>,
    b: ReadonlyArray<number>
  ) => [{ dtype: dt, ne: a }, { dtype: "f32" as const, ne: b }]
  return [
    ["vec", product([37, 19], [37, 5]), ([a, b]) => Ops.mulMat(a, b)],
    // rows shorter than a workgroup share one: one thread per row (K 3, batches broadcast), 16 threads
    // per row with 8 columns and a last workgroup that runs past the rows
    ["vec_short_rows", product([3, 70, 2, 1], [3, 2, 4, 1]), ([a, b]) => Ops.mulMat(a, b)],
    ["vec_shared_rows", product([300, 70], [300, 8]), ([a, b]) => Ops.mulMat(a, b)],
    // K-contiguous and 4-aligned: the vec4 matrix-vector kernel, with a K that is not a multiple of the
    // loads per pass, and a batch broadcast of a over b's batches
    ["vec_aligned", product([1100, 19], [1100, 3]), ([a, b]) => Ops.mulMat(a, b)],
    ["vec_bcast", product([1024, 17, 2, 1], [1024, 1, 4, 3]), ([a, b]) => Ops.mulMat(a, b)],
    ["tiled_bcast", product([64, 33, 2, 1], [64, 45, 4, 3]), ([a, b]) => Ops.mulMat(a, b)],
    ["large_edges", product([40, 130], [40, 135, 2]), ([a, b]) => Ops.mulMat(a, b)],
    ["permuted_b", product([40, 21], [40, 3, 9]), ([a, b]) => Ops.mulMat(a, Ops.permute(b, [0, 2, 1, 3]))],
    ["transposed_b", product([40, 70], [12, 40]), ([a, b]) => Ops.mulMat(a, Ops.transpose(b))]
  ]
}

/**
 * both operands f16: the subgroup-matrix (tensor core) kernel where the device has one. Ragged edges in
 * every dimension, a K that is not a multiple of the K step, an odd K (scalar loads), a batch broadcast,
 * a row-strided view of b
 */
const HALVES: ReadonlyArray<Row> = [
  ["edges", [{ dtype: "f16", ne: [40, 130] }, { dtype: "f16", ne: [40, 135, 2] }], ([a, b]) => Ops.mulMat(a, b)],
  ["deep", [{ dtype: "f16", ne: [200, 37] }, { dtype: "f16", ne: [200, 150] }], ([a, b]) => Ops.mulMat(a, b)],
  ["odd_k", [{ dtype: "f16", ne: [37, 45] }, { dtype: "f16", ne: [37, 33] }], ([a, b]) => Ops.mulMat(a, b)],
  [
    "bcast",
    [{ dtype: "f16", ne: [64, 33, 2, 1] }, { dtype: "f16", ne: [64, 45, 4, 3] }],
    ([a, b]) => Ops.mulMat(a, b)
  ],
  [
    "strided_b",
    [{ dtype: "f16", ne: [48, 70] }, { dtype: "f16", ne: [52, 40] }],
    ([a, b]) => Ops.mulMat(a, Ops.view(b, [48, 40], [b.nb[1]], 4 * 2))
  ]
]

/** @internal */
export const cases = (dt: DType.DType): Array<Case> => [
  ...table(`mul_mat_${dt}`, "mul_mat", mixed(dt), THRESHOLD.mulMat),
  ...(dt === "f16" ? table("mul_mat_f16_f16", "mul_mat", HALVES, THRESHOLD.mulMat) : [])
]
