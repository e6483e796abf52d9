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
  options?: {
    readonly mask?: TensorLike | undefined
    readonly sinks?: TensorLike | undefined
    readonly scale?: number
    readonly maxBias?: number
  }
): Built => {
  const scale = options?.scale ?? 1
  const maxBias = options?.maxBias ?? 0
  const extra = [options?.mask, options?.sinks].filter((t): t is TensorLike => t !== undefined)
  const hasMask = options?.mask !== undefined
  const hasSinks = options?.sinks !== undefined
  const op = Op.SoftMax({ scale, maxBias, hasMask, hasSinks })
  return Tensor.liftN((ts: ReadonlyArray<Tensor.Tensor>) => {
    const [a, ...rest] = ts
    const m = hasMask ? rest[0] : undefined
    const sinks = hasSinks ? rest[rest.length - 1] : undefined
    requireFloat("soft_max", a)
    requireContiguousRows("soft_max", a)
    if (m !== undefined) {
      requireFloat("soft_max", m)
      if (!Tensor.isContiguous(m)) Tensor.fail("soft_max", [a, m], "the mask must be contiguous")
      if (m.ne[0] !== a.ne[0] || m.ne[1] < a.ne[1] || a.ne[2] % m.ne[2] !== 0 || a.ne[3] % m.ne[3] !== 0) {
        Tensor.fail(
          "soft_max",
          [a, m],
          "the mask needs a's ne[0], at least a's ne[1] rows, and dims 2, 3 that divide a's"
        )
      }
    }
    if (sinks !== undefined) {
      if (sinks.dtype !== "f32") Tensor.fail("soft_max", [a, sinks], "sinks must be f32")
      if (Tensor.nelements(sinks) !== a.ne[2]) Tensor.fail("soft_max", [a, sinks], "sinks need one value per a.ne[2]")
    }
    return Tensor.unsafeMake("", a.dtype, a.ne, op, ts)
  })([a, ...extra])
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

/** the options of rope: ggml's rope_ext (frequency factors, YaRN) and rope_multi (sections) */
export interface RopeOptions {
  readonly nDims: number
  readonly mode?: RopeMode
  readonly freqBase?: number
  readonly freqScale?: number
  /** YaRN's mix of extrapolation into interpolation; 0 (the default) is plain rope */
  readonly extFactor?: number
  readonly attnFactor?: number
  readonly betaFast?: number
  readonly betaSlow?: number
  readonly nCtxOrig?: number
  /** modes 8 and 40: the pairs of each of the four position sections (t, h, w, e) */
  readonly sections?: readonly [number, number, number, number]
  /** f32 [nDims / 2]: each pair's frequency is divided by its factor (Llama 3's long context) */
  readonly freqFactors?: TensorLike | undefined
}

/** @internal */
export const rope = (a: TensorLike, pos: TensorLike, options: RopeOptions): Built => {
  const { nDims } = options
  const mode = options.mode ?? 0
  const multi = mode === 8 || mode === 40
  const hasFreqFactors = options.freqFactors !== undefined
  const op = Op.Rope({
    nDims,
    mode,
    freqBase: options.freqBase ?? 10000,
    freqScale: options.freqScale ?? 1,
    extFactor: options.extFactor ?? 0,
    attnFactor: options.attnFactor ?? 1,
    betaFast: options.betaFast ?? 32,
    betaSlow: options.betaSlow ?? 1,
    nCtxOrig: options.nCtxOrig ?? 0,
    sections: options.sections ?? [0, 0, 0, 0],
    hasFreqFactors
  })
  const srcs = hasFreqFactors ? [a, pos, options.freqFactors!] : [a, pos]
  return Tensor.liftN((ts: ReadonlyArray<Tensor.Tensor>) => {
    const [a, p, ff] = ts
    requireFloat("rope", a)
    if (p.dtype !== "i32") Tensor.fail("rope", [a, p], "positions must be i32")
    const perToken = multi ? 4 : 1
    if (p.ne[0] !== perToken * a.ne[2] || Tensor.nelements(p) !== p.ne[0]) {
      Tensor.fail("rope", [a, p], `positions must be a vector of ${perToken} entries per a.ne[2]`)
    }
    if (!Number.isInteger(nDims) || nDims <= 0 || nDims % 2 !== 0 || nDims > a.ne[0]) {
      Tensor.fail("rope", [a, p], `nDims ${nDims} must be even, positive and at most ne[0]`)
    }
    if (mode !== 0 && mode !== 2 && !multi) Tensor.fail("rope", [a, p], `mode ${mode} is not 0, 2, 8 or 40`)
    if (multi) {
      const sum = op.sections.reduce((x, y) => x + y, 0)
      if (op.sections.some((x) => !Number.isInteger(x) || x < 0) || sum === 0 || sum > nDims / 2) {
        Tensor.fail("rope", [a, p], `sections ${op.sections.join(", ")} must sum to at most nDims / 2`)
      }
    }
    if (ff !== undefined && (ff.dtype !== "f32" || Tensor.nelements(ff) < nDims / 2)) {
      Tensor.fail("rope", [a, ff], "freq_factors must be f32 with nDims / 2 values")
    }
    return Tensor.unsafeMake("", a.dtype, a.ne, op, ts)
  })(srcs)
}

/** @internal: x / max(sqrt(sum x^2), eps) over each row */
export const l2Norm = (a: TensorLike, eps: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    requireFloat("l2_norm", a)
    requireContiguousRows("l2_norm", a)
    if (!(eps >= 0)) Tensor.fail("l2_norm", [a], `eps must be >= 0, got ${eps}`)
    return Tensor.unsafeMake("", a.dtype, a.ne, Op.L2Norm({ eps }), [a])
  })(a)

/** @internal: normalization over groups of channels (dimension 2), per i3 */
export const groupNorm = (a: TensorLike, nGroups: number, eps: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    requireFloat("group_norm", a)
    if (!Tensor.isContiguous(a)) Tensor.fail("group_norm", [a], "expects a contiguous tensor")
    if (!Number.isInteger(nGroups) || nGroups < 1) Tensor.fail("group_norm", [a], `n_groups ${nGroups} must be >= 1`)
    if (!(eps >= 0)) Tensor.fail("group_norm", [a], `eps must be >= 0, got ${eps}`)
    return Tensor.unsafeMake("", a.dtype, a.ne, Op.GroupNorm({ nGroups, eps }), [a])
  })(a)
