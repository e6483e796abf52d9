/**
 * Op builders: normalization.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import type { ShapeError } from "../../GpuError.js"
import type { RopeMode } from "../../Op.js"
import { Op } from "../../Op.js"
import type { TensorLike } from "../../Tensor.js"
import * as Tensor from "../../Tensor.js"
import { requireContiguousRows, requireFloat } from "./checks.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

/** @internal */
export const softMax = (
  a: TensorLike,
  options?: { readonly mask?: TensorLike | undefined; readonly scale?: number; readonly maxBias?: number }
): Built => {
  const scale = options?.scale ?? 1
  const maxBias = options?.maxBias ?? 0
  const op = Op.SoftMax({ scale, maxBias })
  if (options?.mask === undefined) {
    return Tensor.lift1((a: Tensor.Tensor) => {
      requireFloat("soft_max", a)
      requireContiguousRows("soft_max", a)
      return Tensor.unsafeMake("", a.dtype, a.ne, op, [a])
    })(a)
  }
  return Tensor.lift2((a: Tensor.Tensor, m: Tensor.Tensor) => {
    requireFloat("soft_max", a, m)
    requireContiguousRows("soft_max", a)
    if (!Tensor.isContiguous(m)) Tensor.fail("soft_max", [a, m], "the mask must be contiguous")
    if (m.ne[0] !== a.ne[0] || m.ne[1] < a.ne[1] || a.ne[2] % m.ne[2] !== 0 || a.ne[3] % m.ne[3] !== 0) {
      Tensor.fail(
        "soft_max",
        [a, m],
        "the mask needs a's ne[0], at least a's ne[1] rows, and dims 2, 3 that divide a's"
      )
    }
    return Tensor.unsafeMake("", a.dtype, a.ne, op, [a, m])
  })(a, options.mask)
}

const norm = (kind: "rms_norm" | "norm") => (a: TensorLike, eps: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    requireFloat(kind, a)
    requireContiguousRows(kind, a)
    if (!(eps >= 0)) Tensor.fail(kind, [a], `eps must be >= 0, got ${eps}`)
    return Tensor.unsafeMake("", a.dtype, a.ne, kind === "norm" ? Op.Norm({ eps }) : Op.RmsNorm({ eps }), [a])
  })(a)

/** @internal */
export const rmsNorm: (a: TensorLike, eps: number) => Built = norm("rms_norm")

/** @internal */
export const normalize: (a: TensorLike, eps: number) => Built = norm("norm")

/** @internal */
export const rope = (
  a: TensorLike,
  pos: TensorLike,
  options: {
    readonly nDims: number
    readonly mode?: RopeMode
    readonly freqBase?: number
    readonly freqScale?: number
  }
): Built =>
  Tensor.lift2((a: Tensor.Tensor, p: Tensor.Tensor) => {
    const { nDims } = options
    const mode = options.mode ?? 0
    requireFloat("rope", a)
    if (p.dtype !== "i32") Tensor.fail("rope", [a, p], "positions must be i32")
    if (p.ne[0] !== a.ne[2] || Tensor.nelements(p) !== p.ne[0]) {
      Tensor.fail("rope", [a, p], "positions must be a vector with one entry per a.ne[2]")
    }
    if (!Number.isInteger(nDims) || nDims <= 0 || nDims % 2 !== 0 || nDims > a.ne[0]) {
      Tensor.fail("rope", [a, p], `nDims ${nDims} must be even, positive and at most ne[0]`)
    }
    if (mode !== 0 && mode !== 2) Tensor.fail("rope", [a, p], `mode ${mode} is not 0 (normal) or 2 (neox)`)
    return Tensor.unsafeMake(
      "",
      a.dtype,
      a.ne,
      Op.Rope({ nDims, mode, freqBase: options.freqBase ?? 10000, freqScale: options.freqScale ?? 1 }),
      [a, p]
    )
  })(a, pos)
