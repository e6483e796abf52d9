/**
 * The quickstart's computation, shared by the page and by the test that checks the page against the CPU
 * backend in Node: softmax(w^T x + bias) with w [K, M], x [K, N], bias [M, 1].
 */
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
}

export const quickstart: Effect.Effect<Outcome, unknown, Registry.Registry> = Effect.scoped(
  Effect.gen(function*() {
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
    yield* backend.compute(plan)
    const out = yield* plan.get(y)
    return { device: props.name, type: props.type, description: props.description, result: Array.from(out) }
  })
)
