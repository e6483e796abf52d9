/**
 * Quantized cases, for each of ggml's block types: mul_mat with quantized weights and f32 activations
 * (matrix-vector with few columns, tiled with many; batch broadcast, a view of a row range, a permuted
 * src1, K of several blocks), get_rows from a quantized table, copies to f32, and f32 copies that
 * quantize (q8_0, q4_0). Inputs are seeded values quantized as ggml would; results compare by value.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import * as Ops from "@effect-gpu/core/Ops"
import type { Case, Row } from "./case.js"
import { table, THRESHOLD } from "./case.js"

const mulMat = (dt: DType.Quantized): ReadonlyArray<Row> => {
  // K: a few blocks (K-quants take 256 per block)
  const K = DType.blockSize(dt) === 256 ? 256 : 96
  const product = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => [
    { dtype: dt, ne: [K, ...a] },
    { dtype: "f32" as const, ne: [K, ...b] }
  ]
  return [
    ["vec", product([37], [5]), ([a, b]) => Ops.mulMat(a, b)],
    ["vec_bcast", product([19, 2, 1], [1, 4, 3]), ([a, b]) => Ops.mulMat(a, b)],
    ["tiled", product([45], [33, 2]), ([a, b]) => Ops.mulMat(a, b)],
    // rows 3.. of a, a view at a whole-row byte offset
    [
      "row_view",
      product([40], [3]),
      ([a, b]) => Ops.mulMat(Ops.view(a, [K, 37], [a.nb[1]], 3 * a.nb[1]), b)
    ],
    ["permuted_b", product([21], [3, 9]), ([a, b]) => Ops.mulMat(a, Ops.permute(b, [0, 2, 1, 3]))]
  ]
}

const rows = (dt: DType.Quantized): ReadonlyArray<Row> => {
  const K = DType.blockSize(dt) === 256 ? 256 : 64
  return [
    ["get_rows", [{ dtype: dt, ne: [K, 11] }, { dtype: "i32", ne: [6], index: 11 }], ([a, i]) => Ops.getRows(a, i)],
    [
      "get_rows_batched",
      [{ dtype: dt, ne: [K, 7, 2] }, { dtype: "i32", ne: [5, 2], index: 7 }],
      ([a, i]) => Ops.getRows(a, i)
    ],
    ["to_f32", [{ dtype: dt, ne: [K, 3, 2] }], ([a]) => Ops.cpy(a, "f32")]
  ]
}

/** f32 rows quantized: an odd count of blocks (a thread's last block alone) and several rows */
const quantize = (dt: "q8_0" | "q4_0"): ReadonlyArray<Row> => [
  ["odd_blocks", [{ dtype: "f32", ne: [96, 3] }], ([a]) => Ops.cpy(a, dt)],
  ["rows", [{ dtype: "f32", ne: [256, 5, 2] }], ([a]) => Ops.cpy(a, dt)]
]

/** @internal */
export const cases = (): Array<Case> => [
  ...DType.quantized.flatMap((dt) => [
    ...table(`mul_mat_${dt}`, "mul_mat", mulMat(dt), THRESHOLD.mulMat),
    ...table(dt, "get_rows", rows(dt))
  ]),
  ...table("cpy_f32_q8_0", "cpy", quantize("q8_0"), THRESHOLD.f16),
  ...table("cpy_f32_q4_0", "cpy", quantize("q4_0"), THRESHOLD.f16)
]
