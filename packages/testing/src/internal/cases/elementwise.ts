/**
 * Element-wise cases: unary ops, binary ops with every broadcast, and conversions, each on odd, permuted,
 * aligned and offset shapes.
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import type { ShapeError } from "@effect-gpu/core/GpuError"
import * as Ops from "@effect-gpu/core/Ops"
import type { Tensor } from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type { Case } from "./case.js"
import { make, unaryShapes } from "./case.js"

type Unary = (t: Tensor) => Effect.Effect<Tensor, ShapeError>

/** [op, how it is built, whether it needs positive inputs] */
const UNARY: ReadonlyArray<readonly [string, Unary, boolean]> = [
  ["scale", (t) => Ops.scale(t, 0.37), false],
  ["sqr", Ops.sqr, false],
  ["sqrt", Ops.sqrt, true],
  ["exp", Ops.exp, false],
  ["log", Ops.log, true],
  ["clamp", (t) => Ops.clamp(t, -0.5, 0.75), false],
  ["relu", Ops.relu, false],
  ["gelu", Ops.gelu, false],
  ["gelu_quick", Ops.geluQuick, false],
  ["silu", Ops.silu, false],
  ["tanh", Ops.tanh, false],
  ["sigmoid", Ops.sigmoid, false],
  ["neg", Ops.neg, false],
  ["abs", Ops.abs, false],
  ["cont", Ops.cont, false],
  ["dup", Ops.dup, false]
]

const BINARY = [["add", Ops.add], ["sub", Ops.sub], ["mul", Ops.mul], ["div", Ops.div]] as const

/** [suffix, src0 shape, src1 shape, src0 permuted]: same shape, broadcasts, one row, a permuted src0 */
const BINARY_SHAPES: ReadonlyArray<readonly [string, ReadonlyArray<number>, ReadonlyArray<number>, boolean]> = [
  ["same", [5, 7, 3, 2], [5, 7, 3, 2], false],
  ["bcast", [5, 7, 3, 2], [5, 1, 3, 1], false],
  ["aligned", [8, 7, 3, 2], [8, 7, 3, 2], false],
  ["row", [8, 7, 3, 2], [8], false],
  ["permuted_bcast", [7, 5, 3, 2], [1, 7, 1, 2], true]
]

/** @internal */
export const cases = (dt: DType.DType, floats: ReadonlyArray<DType.DType>): Array<Case> => [
  ...UNARY.flatMap(([name, f, positive]) =>
    unaryShapes(dt, positive).map((s) =>
      make(`${name}_${dt}_${s.tag}`, name, [s.input], ([a]) => Effect.flatMap(s.view(a), f))
    )
  ),
  ...BINARY.flatMap(([name, f]) =>
    BINARY_SHAPES.map(([tag, ane, bne, permuted]) =>
      make(
        `${name}_${dt}_${tag}`,
        name,
        [{ dtype: dt, ne: ane }, { dtype: dt, ne: bne, positive: name === "div" }],
        ([a, b]) => f(permuted ? Ops.permute(a, [1, 0, 2, 3]) : a, b)
      )
    )
  ),
  ...floats.flatMap((to) =>
    unaryShapes(dt).map((s) => make(`cpy_${dt}_to_${to}_${s.tag}`, "cpy", [s.input], ([a]) => Ops.cpy(s.view(a), to)))
  )
]
