/**
 * The conformance suite: every op of the core set, for each dtype a backend offers, on at least three
 * shapes (odd sizes, permuted or offset views, broadcasting), computed on the backend under test and on
 * the CPU reference from the same seeded, non-zero inputs, and compared with ggml's NMSE thresholds.
 * Every tensor sits between sentinel bytes that must survive the compute (out-of-bounds writes), and
 * outputs are poisoned (NaN, -1) before each run so an element a kernel forgot to write is caught.
 *
 * @since 0.1.0
 */
import type { Backend } from "@effect-gpu/core/Backend"
import type { Buffer } from "@effect-gpu/core/Buffer"
import * as Cpu from "@effect-gpu/core/Cpu"
import type { Device } from "@effect-gpu/core/Device"
import * as DType from "@effect-gpu/core/DType"
import type {
  AllocationError,
  BackendError,
  NotAnOutput,
  OutOfBounds,
  ShapeError,
  UnsupportedOp
} from "@effect-gpu/core/GpuError"
import * as Graph from "@effect-gpu/core/Graph"
import * as Op from "@effect-gpu/core/Op"
import type { Binding } from "@effect-gpu/core/Plan"
import * as Quant from "@effect-gpu/core/Quant"
import type { Tensor } from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Compare from "./Compare.js"
import * as Gen from "./Generators.js"
import * as Attention from "./internal/cases/attention.js"
import * as CaseModel from "./internal/cases/case.js"
import * as Elementwise from "./internal/cases/elementwise.js"
import * as Experts from "./internal/cases/experts.js"
import * as Indexing from "./internal/cases/indexing.js"
import * as MatMul from "./internal/cases/matmul.js"
import * as Quantized from "./internal/cases/quantized.js"
import * as Reductions from "./internal/cases/reductions.js"
import * as Rows from "./internal/cases/rows.js"
import * as Shape from "./internal/cases/shape.js"

/**
 * An input of a case: its type and shape, and what values it takes.
 *
 * @since 0.1.0
 * @category models
 */
export type Input = CaseModel.Input

/**
 * A case: the op under test, its inputs, how its graph is built, and how its output is compared.
 *
 * @since 0.1.0
 * @category models
 */
export type Case = CaseModel.Case

/**
 * The cases, for a backend that does (or does not) offer f16: per family, each float type the backend
 * offers, then the quantized types, the experts, and the f32-only reductions and sorts.
 *
 * @since 0.1.0
 * @category constructors
 */
export const cases = (options: { readonly f16: boolean }): ReadonlyArray<Case> => {
  const floats = CaseModel.floatTypes(options.f16)
  return [
    ...floats.flatMap((dt) => [
      ...Elementwise.cases(dt, floats),
      ...MatMul.cases(dt),
      ...Rows.cases(dt),
      ...Indexing.cases(dt),
      ...Shape.cases(dt),
      ...Attention.cases(dt)
    ]),
    ...Quantized.cases(),
    ...Experts.cases(floats),
    ...Reductions.cases()
  ]
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Outcome {
  readonly name: string
  readonly passed: boolean
  readonly detail: string
}

/** the host data of an input, from the case's seed */
const inputData = (input: Input, seed: number): ArrayLike<number> => {
  const n = input.ne.reduce((a, b) => a * b, 1)
  if (input.values !== undefined) return input.values
  if (input.dtype === "i32") {
    if (input.distinct !== undefined) {
      const perm = Array.from({ length: input.distinct }, (_, i) => i)
      const next = Gen.prng(seed)
      for (let i = perm.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1))
        ;[perm[i], perm[j]] = [perm[j], perm[i]]
      }
      return Int32Array.from({ length: n }, (_, i) => perm[i % input.ne[0]])
    }
    return Gen.indices(seed, n, input.index ?? 1)
  }
  const values = Gen.values(seed, n, { positive: input.positive ?? false })
  // a quantized input takes raw blocks: the values quantized as ggml would
  return DType.isQuantized(input.dtype) ? Quant.unsafeQuantize(input.dtype, values) : values
}

const GUARD = 64
const SENTINEL = 0xa5
const POISON = 0xff

/**
 * Runs a case on a backend with every tensor between sentinel guards and outputs poisoned; returns the
 * output and whether the guards survived.
 *
 * @since 0.1.0
 * @category running
 */
export const runGuarded = (
  c: Case,
  backend: Backend,
  seed: number
): Effect.Effect<
  { readonly output: ArrayLike<number>; readonly overwritten: ReadonlyArray<string> },
  ShapeError | AllocationError | UnsupportedOp | OutOfBounds | BackendError | NotAnOutput,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const g = Graph.make()
    const inputs: Array<Tensor> = []
    for (const [i, spec] of c.inputs.entries()) inputs.push(yield* g.input(`in${i}`, spec.dtype, spec.ne))
    const y = yield* g.output(c.build(inputs), "out")
    const graph = g.build()
    const owners = [...graph.leafs, ...graph.nodes.filter((n) => n.viewSrc === undefined)]
    const bufferType = backend.device.bufferType
    const align = (n: number) => Math.ceil(n / bufferType.alignment) * bufferType.alignment
    let offset = align(GUARD)
    const placed: Array<{ t: Tensor; offset: number; size: number }> = []
    for (const t of owners) {
      const size = Math.max(bufferType.allocSize(t), 1)
      placed.push({ t, offset, size })
      offset = align(offset + size + GUARD)
    }
    const buffer: Buffer = yield* bufferType.allocate(offset + GUARD)
    yield* buffer.memset(0, buffer.size, SENTINEL)
    for (const p of placed) yield* buffer.memset(p.offset, p.size, POISON)
    const bindings: Array<Binding> = placed.map((p) => ({ tensor: p.t, buffer, offset: p.offset }))
    const plan = yield* backend.allocate(graph, { bindings })
    for (const [i, spec] of c.inputs.entries()) yield* plan.set(inputs[i], inputData(spec, seed + 7919 * i))
    yield* backend.compute(plan)
    // a quantized result is compared by its values
    const output = DType.isQuantized(y.dtype)
      ? Quant.unsafeDequantize(y.dtype, yield* plan.getBytes(y))
      : yield* plan.get(y)
    const bytes = yield* buffer.get(0, buffer.size)
    const overwritten: Array<string> = []
    let start = 0
    for (const p of [...placed, { t: undefined, offset: buffer.size, size: 0 }]) {
      for (let k = start; k < p.offset; k++) {
        if (bytes[k] !== SENTINEL) {
          overwritten.push(`byte ${k} before ${p.t ? Op.name(p.t.op) : "the end"}`)
          break
        }
      }
      start = p.offset + p.size
    }
    return { output, overwritten }
  })

/**
 * Runs a case on the backend under test and on the CPU reference and compares them.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (
  c: Case,
  tested: Backend,
  reference: Backend,
  seed = 1
): Effect.Effect<
  Outcome,
  ShapeError | AllocationError | UnsupportedOp | OutOfBounds | BackendError | NotAnOutput,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const ours = yield* runGuarded(c, tested, seed)
    const ref = yield* runGuarded(c, reference, seed)
    if (ours.overwritten.length > 0) {
      return { name: c.name, passed: false, detail: `out-of-bounds write: ${ours.overwritten.join("; ")}` }
    }
    const result = Compare.compare(c.compare, ours.output, ref.output, {
      bound: c.nmse,
      rowLength: rowLength(c, ref.output.length)
    })
    return { name: c.name, passed: result.passed, detail: result.detail }
  }).pipe(Effect.withSpan("Conformance.run", { attributes: { case: c.name } }))

/** the length of the output's rows: the output's elements over the first input's rows (top_k's k) */
const rowLength = (c: Case, outputLength: number) => {
  const rows = c.inputs[0].ne.slice(1).reduce((a, b) => a * b, 1)
  return outputLength / rows
}

/**
 * A CPU device to compare against, independent of any registry.
 *
 * @since 0.1.0
 * @category constructors
 */
export const referenceDevice: Effect.Effect<Device> = Effect.sync(() => Cpu.make({ name: "CPU-reference" }))

/**
 * A backend of a fresh reference device.
 *
 * @since 0.1.0
 * @category constructors
 */
export const referenceBackend: Effect.Effect<Backend, never, Scope.Scope> = Effect.flatMap(
  referenceDevice,
  // a fresh device: it cannot be released yet
  (device) => Effect.orDie(device.makeBackend())
)
