/**
 * The quickstart's computation, shared by the demo, the browser page and the page's test (which checks it
 * against the CPU backend in Node): softmax(w^T x + bias) with w [K, M], x [K, N], bias [M, 1].
 */
import type { Trace } from "@effect-gpu/core"
import { Graph, Ops, Registry } from "@effect-gpu/core"
import { Effect } from "effect"

export const M = 4
export const N = 3
export const K = 8

/** the device that ran and the result, M values per column */
export interface Outcome {
  readonly device: string
  readonly type: string
  readonly description: string
  readonly result: ReadonlyArray<number>
  /** the compute's per-dispatch trace, where asked for */
  readonly trace?: Trace.Trace
}

/** the quickstart on the best device; with `capture`, its compute traced */
export const run = (capture = false): Effect.Effect<Outcome, unknown, Registry.Registry> =>
  Effect.scoped(Effect.gen(function*() {
    const device = yield* Registry.bestDevice
    const props = yield* device.props
    const backend = yield* device.makeBackend()
    const g = Graph.make()
    const w = yield* g.input("w", "f32", [K, M])
    const x = yield* g.input("x", "f32", [K, N])
    const bias = yield* g.input("bias", "f32", [M, 1])
    const y = yield* g.output(Ops.softMax(Ops.add(Ops.mulMat(w, x), bias)), "y")
    const plan = yield* backend.allocate(g)
    yield* plan.set(w, Array.from({ length: K * M }, (_, i) => Math.sin(i + 1)))
    yield* plan.set(x, Array.from({ length: K * N }, (_, i) => Math.cos(i + 1)))
    yield* plan.set(bias, [0.1, -0.2, 0.3, -0.4])
    const trace = capture ? yield* backend.captureNext : undefined
    yield* backend.compute(plan)
    const out = yield* plan.get(y)
    const outcome = { device: props.name, type: props.type, description: props.description, result: Array.from(out) }
    return trace === undefined ? outcome : { ...outcome, trace: yield* trace }
  }))

/** the quickstart on the best device, untraced */
export const quickstart: Effect.Effect<Outcome, unknown, Registry.Registry> = run()
