import type { DType, GpuError, Tensor as TensorNs } from "@effect-gpu/core"
import { Cpu, Graph, Registry, Tensor } from "@effect-gpu/core"
import { Effect } from "effect"

export interface Input {
  readonly dtype: DType.DType
  readonly ne: ReadonlyArray<number>
  readonly data: ArrayLike<number>
}

/** Builds a graph over the inputs, computes it on the registry's CPU and reads the result back. */
export const evaluate = (
  inputs: ReadonlyArray<Input>,
  build: (...ts: Array<TensorNs.Tensor>) => Effect.Effect<TensorNs.Tensor, GpuError.ShapeError>
) =>
  Effect.scoped(Effect.gen(function*() {
    const g = Graph.make()
    const ts: Array<TensorNs.Tensor> = []
    for (const [i, inp] of inputs.entries()) ts.push(yield* g.input(`in${i}`, inp.dtype, inp.ne))
    const y = yield* g.output(build(...ts))
    const device = yield* Registry.deviceByName("CPU")
    const backend = yield* device.makeBackend()
    const plan = yield* backend.allocate(g)
    for (const [i, inp] of inputs.entries()) yield* plan.set(ts[i], inp.data)
    yield* backend.compute(plan)
    return { values: Array.from(yield* plan.get(y)), shape: [...y.ne], tensor: y }
  }))

/** A seeded generator of non-zero values in [-1, -0.05] U [0.05, 1]. */
export const random = (seed: number) => {
  let s = seed >>> 0
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return (n: number, positive = false): Array<number> =>
    Array.from({ length: n }, () => {
      const v = 0.05 + 0.95 * next()
      return positive || next() < 0.5 ? v : -v
    })
}

export const close = (a: ReadonlyArray<number>, b: ReadonlyArray<number>, tol = 1e-5): boolean =>
  a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= tol * Math.max(1, Math.abs(b[i])))

export { Tensor }

/** computes `graph` on the CPU with the given inputs and reads `outputs` back */
export const compute = (
  graph: Graph.Graph,
  inputs: ReadonlyMap<Tensor.Tensor, ReadonlyArray<number>>,
  outputs: ReadonlyArray<Tensor.Tensor>
) =>
  Effect.scoped(Effect.gen(function*() {
    const backend = yield* Cpu.make().makeBackend()
    const plan = yield* backend.allocate(graph)
    for (const [t, v] of inputs) yield* plan.set(t, v)
    yield* backend.compute(plan)
    const out: Array<Array<number>> = []
    for (const t of outputs) out.push(Array.from(yield* plan.get(t)))
    return out
  }))
