/**
 * What a conformance case is, and the pieces the family tables share: thresholds by op kind and dtype,
 * and the shapes element-wise cases run on.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import type { ShapeError } from "@effect-gpu/core/GpuError"
import * as Ops from "@effect-gpu/core/Ops"
import type { Tensor } from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type { Rule } from "../../Compare.js"

/** @internal */
export interface Input {
  readonly dtype: DType.DType
  readonly ne: ReadonlyArray<number>
  /** positive values only (sqrt, log, divisors) */
  readonly positive?: boolean
  /** i32 data: integers in [0, index) */
  readonly index?: number
  /** i32 data: distinct integers in [0, distinct) (set_rows) */
  readonly distinct?: number
  /** fixed values */
  readonly values?: ReadonlyArray<number>
}

/** @internal */
export interface Case {
  readonly name: string
  /** the op under test (ggml's name) */
  readonly op: string
  readonly inputs: ReadonlyArray<Input>
  readonly build: (ts: ReadonlyArray<Tensor>) => Effect.Effect<Tensor, ShapeError>
  readonly compare: Rule
  readonly nmse: number
}

/** @internal: NMSE bounds: element-wise ops, products, softmax-like ops, and anything with f16 */
export const THRESHOLD = { default: 1e-7, mulMat: 5e-4, softMax: 1e-6, f16: 1e-6 }

/** @internal: the float types a backend with (or without) f16 is tested in */
export const floatTypes = (f16: boolean): ReadonlyArray<DType.DType> => f16 ? ["f32", "f16"] : ["f32"]

/** @internal: a case; its bound is `base`, raised to THRESHOLD.f16 where an input is f16 */
export const make = (
  name: string,
  op: string,
  inputs: ReadonlyArray<Input>,
  build: (ts: ReadonlyArray<Tensor>) => Effect.Effect<Tensor, ShapeError>,
  base = THRESHOLD.default,
  compare: Rule = "nmse"
): Case => ({
  name,
  op,
  inputs,
  build,
  compare,
  nmse: inputs.some((i) => i.dtype === "f16") ? Math.max(base, THRESHOLD.f16) : base
})

/** @internal: a row of a family table: [name suffix, inputs, how the case builds its graph] */
export type Row = readonly [
  string,
  ReadonlyArray<Input>,
  (ts: ReadonlyArray<Tensor>) => Effect.Effect<Tensor, ShapeError>
]

/** @internal: the cases of a table, `<prefix>_<suffix>` each */
export const table = (
  prefix: string,
  op: string,
  rows: ReadonlyArray<Row>,
  base = THRESHOLD.default,
  compare: Rule = "nmse"
): Array<Case> => rows.map(([suffix, inputs, build]) => make(`${prefix}_${suffix}`, op, inputs, build, base, compare))

/** @internal: the shapes of an element-wise case: odd, a permuted view, aligned rows, an offset view */
export const unaryShapes = (dt: DType.DType, positive = false) =>
  [
    { tag: "odd", input: { dtype: dt, ne: [5, 7, 3, 2], positive }, view: (t: Tensor) => Effect.succeed(t) },
    {
      tag: "permuted",
      input: { dtype: dt, ne: [7, 5, 3, 2], positive },
      view: (t: Tensor) => Ops.permute(t, [1, 0, 2, 3])
    },
    { tag: "aligned", input: { dtype: dt, ne: [64, 3], positive }, view: (t: Tensor) => Effect.succeed(t) },
    {
      tag: "offset-view",
      input: { dtype: dt, ne: [131, 3], positive },
      view: (t: Tensor) => Ops.view(t, [129, 3], [131 * DType.typeSize(dt)], 2 * DType.typeSize(dt))
    }
  ] as const
