/**
 * ggml's own answers: op cases computed by ggml's CPU backend (inputs, a small graph, the output), as
 * shipped in `reference/ggml` (cases.json + data.bin). This module decodes a case, builds its graph with
 * `Ops`, runs it on any backend and compares with ggml's output. It reads no files: callers pass bytes.
 *
 * @since 0.1.0
 */
import type { AllocateOptions, Backend } from "@effect-gpu/core/Backend"
import type { DType } from "@effect-gpu/core/DType"
import * as DTypeModule from "@effect-gpu/core/DType"
import * as Float16 from "@effect-gpu/core/Float16"
import type { AllocationError, BackendError, NotAnOutput, OutOfBounds, UnsupportedOp } from "@effect-gpu/core/GpuError"
import { ShapeError } from "@effect-gpu/core/GpuError"
import * as Graph from "@effect-gpu/core/Graph"
import type { GluKind, RopeMode, UnaryKind } from "@effect-gpu/core/Op"
import * as Ops from "@effect-gpu/core/Ops"
import * as Quant from "@effect-gpu/core/Quant"
import type * as Scheduler from "@effect-gpu/core/Scheduler"
import type { Tensor } from "@effect-gpu/core/Tensor"
import type { HostArray } from "@effect-gpu/core/TensorData"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Compare from "./Compare.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface TensorSpec {
  readonly name: string
  readonly type: DType
  readonly ne: ReadonlyArray<number>
  readonly offset: number
  readonly nbytes: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Step {
  readonly out: string
  readonly op: string
  readonly src: ReadonlyArray<string>
  readonly params?: Record<string, unknown>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Case {
  readonly name: string
  readonly inputs: ReadonlyArray<TensorSpec>
  readonly graph: ReadonlyArray<Step>
  readonly output: TensorSpec
  readonly compare: Compare.Rule
  readonly nmse: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Suite {
  readonly generator: string
  readonly cases: ReadonlyArray<Case>
  readonly data: Uint8Array
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const parse = (casesJson: string, data: Uint8Array): Suite => {
  const parsed = JSON.parse(casesJson) as { generator: string; cases: Array<Case> }
  return { generator: parsed.generator, cases: parsed.cases, data }
}

/**
 * A tensor of the data file as `plan.set` takes it: numbers for f32/f16 (f16 decoded), integers for i32,
 * the raw blocks of a quantized type.
 *
 * @since 0.1.0
 * @category getters
 */
export const values = (suite: Suite, spec: TensorSpec): HostArray => {
  const bytes = suite.data.slice(spec.offset, spec.offset + spec.nbytes)
  switch (spec.type) {
    case "f32":
      return new Float32Array(bytes.buffer)
    case "f16":
      return Float16.decodeArray(new Uint16Array(bytes.buffer))
    case "i32":
      return new Int32Array(bytes.buffer)
    default:
      return bytes
  }
}

/** a tensor's values to compare: quantized blocks dequantized (both sides, as the cases' README says) */
const comparable = (type: DType, data: HostArray): ArrayLike<number> =>
  DTypeModule.isQuantized(type) && data instanceof Uint8Array ? Quant.unsafeDequantize(type, data) : data

/** a float parameter: written with 9 significant digits, read as the f32 it was */
const num = (p: Record<string, unknown> | undefined, key: string, fallback?: number): number => {
  const v = p?.[key] ?? fallback
  if (typeof v !== "number") throw new Error(`param ${key} missing`)
  return Math.fround(v)
}

const unaryOps: ReadonlyArray<string> = ["relu", "gelu", "gelu_quick", "silu", "tanh", "sigmoid", "neg", "abs"]

/**
 * Builds one step with `Ops`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const buildStep = (step: Step, src: ReadonlyArray<Tensor>): Effect.Effect<Tensor, ShapeError> => {
  const p = step.params
  const [a, b, c] = src
  switch (step.op) {
    case "add":
      return Ops.add(a, b)
    case "sub":
      return Ops.sub(a, b)
    case "mul":
      return Ops.mul(a, b)
    case "div":
      return Ops.div(a, b)
    case "scale":
      return Ops.scale(a, num(p, "s"))
    case "clamp":
      return Ops.clamp(a, num(p, "min"), num(p, "max"))
    case "sqr":
      return Ops.sqr(a)
    case "sqrt":
      return Ops.sqrt(a)
    case "exp":
      return Ops.exp(a)
    case "log":
      return Ops.log(a)
    case "mul_mat":
      return Ops.mulMat(a, b)
    case "soft_max":
      return Ops.softMax(a, { mask: b, sinks: c, scale: num(p, "scale", 1), maxBias: num(p, "max_bias", 0) })
    case "flash_attn_ext":
      return Ops.flashAttnExt(a, b, c, {
        mask: src[3],
        sinks: src[4],
        scale: num(p, "scale"),
        maxBias: num(p, "max_bias", 0),
        logitSoftcap: num(p, "logit_softcap", 0)
      })
    case "mul_mat_id":
      return Ops.mulMatId(a, b, c)
    case "add_id":
      return Ops.addId(a, b, c)
    case "l2_norm":
      return Ops.l2Norm(a, num(p, "eps"))
    case "group_norm":
      return Ops.groupNorm(a, num(p, "n_groups"), num(p, "eps"))
    case "rms_norm":
      return Ops.rmsNorm(a, num(p, "eps"))
    case "norm":
      return Ops.normalize(a, num(p, "eps"))
    case "rope":
      return Ops.rope(a, b, {
        nDims: num(p, "n_dims"),
        mode: num(p, "mode", 0) as RopeMode,
        freqBase: num(p, "freq_base", 10000),
        freqScale: num(p, "freq_scale", 1),
        extFactor: num(p, "ext_factor", 0),
        attnFactor: num(p, "attn_factor", 1),
        betaFast: num(p, "beta_fast", 0),
        betaSlow: num(p, "beta_slow", 0),
        nCtxOrig: num(p, "n_ctx_orig", 0),
        ...(p?.sections === undefined ? {} : { sections: p.sections as [number, number, number, number] }),
        freqFactors: c
      })
    case "get_rows":
      return Ops.getRows(a, b)
    case "set_rows":
      return Ops.setRows(a, b, c)
    case "cpy":
      return Ops.cpy(a, p?.type as DType)
    case "cont":
      return Ops.cont(a)
    case "permute":
      return Ops.permute(a, p?.axes as ReadonlyArray<number>)
    case "transpose":
      return Ops.transpose(a)
    case "view": {
      const ne = p?.ne as ReadonlyArray<number>
      const nb1 = num(p, "nb1")
      const nb2 = num(p, "nb2", nb1 * (ne[1] ?? 1))
      const nb3 = num(p, "nb3", nb2 * (ne[2] ?? 1))
      return Ops.view(a, ne, [nb1, nb2, nb3], num(p, "offset", 0))
    }
    case "sum_rows":
      return Ops.sumRows(a)
    case "sum":
      return Ops.sum(a)
    case "mean":
      return Ops.mean(a)
    case "argmax":
      return Ops.argmax(a)
    case "cumsum":
      return Ops.cumsum(a)
    case "argsort":
      return Ops.argsort(a, p?.order as "asc" | "desc")
    case "top_k":
      return Ops.topK(a, num(p, "k"))
    case "concat":
      return Ops.concat(a, b, num(p, "dim"))
    case "glu":
      return Ops.glu(a, p?.kind as GluKind, { gate: b, swapped: Boolean(p?.swapped) })
    case "diag_mask_inf":
      return Ops.diagMaskInf(a, num(p, "n_past"))
    case "pad":
      return Ops.pad(a, p?.p as [number, number, number, number])
    case "repeat":
      return Ops.repeat(a, b)
    default:
      if (unaryOps.includes(step.op)) return Ops.unary(a, step.op as UnaryKind)
      return Effect.fail(
        new ShapeError({
          op: step.op,
          shapes: src.map((t) => [...t.ne]),
          dtypes: src.map((t) => t.dtype),
          reason: "unknown op"
        })
      )
  }
}

/**
 * A case's graph built with our API: its inputs, its output, the builder.
 *
 * @since 0.1.0
 * @category constructors
 */
export const buildCase = (
  c: Case
): Effect.Effect<
  { readonly graph: Graph.Graph; readonly inputs: Map<string, Tensor>; readonly output: Tensor },
  ShapeError
> =>
  Effect.gen(function*() {
    const g = Graph.make()
    const named = new Map<string, Tensor>()
    const inputs = new Map<string, Tensor>()
    for (const spec of c.inputs) {
      const t = yield* g.input(spec.name, spec.type, spec.ne)
      named.set(spec.name, t)
      inputs.set(spec.name, t)
    }
    let last: Tensor | undefined
    for (const step of c.graph) {
      const src = step.src.map((s) => {
        const t = named.get(s)
        if (t === undefined) throw new Error(`case ${c.name}: unknown source ${s}`)
        return t
      })
      last = yield* buildStep(step, src)
      named.set(step.out, last)
    }
    const output = yield* g.output(last!, c.output.name)
    return { graph: g.build(), inputs, output }
  })

/**
 * @since 0.1.0
 * @category models
 */
export interface Outcome {
  readonly name: string
  readonly passed: boolean
  /** what was measured: the NMSE, or the count of differing elements or rows */
  readonly error: number
  readonly bound: number
  readonly detail: string
}

/**
 * Compares an output with ggml's by the case's rule.
 *
 * @since 0.1.0
 * @category comparison
 */
export const compare = (c: Case, ours: HostArray, ref: HostArray): Outcome => ({
  name: c.name,
  bound: c.nmse,
  ...Compare.compare(c.compare, comparable(c.output.type, ours), comparable(c.output.type, ref), {
    bound: c.nmse,
    rowLength: c.output.ne[0]
  })
})

/**
 * Runs a case on a backend and compares with ggml's output.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (
  suite: Suite,
  c: Case,
  backend: Backend,
  options?: AllocateOptions
): Effect.Effect<
  Outcome,
  ShapeError | AllocationError | UnsupportedOp | OutOfBounds | BackendError | NotAnOutput,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const built = yield* buildCase(c)
    const plan = yield* backend.allocate(built.graph, options)
    for (const spec of c.inputs) yield* plan.set(built.inputs.get(spec.name)!, values(suite, spec))
    yield* backend.compute(plan)
    const ours = yield* plan.get(built.output)
    return compare(c, ours, values(suite, c.output))
  }).pipe(Effect.withSpan("GgmlReference.run", { attributes: { case: c.name } }))

/**
 * Runs a case through a scheduler (placed and split over its backends, copies between) and compares it
 * with ggml's result, as `run` does on one backend.
 *
 * @since 0.1.0
 * @category running
 */
export const runScheduled = (
  suite: Suite,
  c: Case,
  scheduler: Scheduler.Scheduler
): Effect.Effect<
  Outcome & { readonly splits: number; readonly nodes: number },
  ShapeError | AllocationError | UnsupportedOp | OutOfBounds | BackendError | NotAnOutput,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const built = yield* buildCase(c)
    const plan = yield* scheduler.allocate(built.graph)
    for (const spec of c.inputs) yield* plan.set(built.inputs.get(spec.name)!, values(suite, spec))
    yield* scheduler.compute(plan)
    const ours = yield* plan.get(built.output)
    return {
      ...compare(c, ours, values(suite, c.output)),
      splits: plan.splits.length,
      nodes: plan.splits.reduce((n, s) => n + s.nodes.length, 0)
    }
  }).pipe(Effect.withSpan("GgmlReference.runScheduled", { attributes: { case: c.name } }))
