/**
 * What a benchmark case is, and how our side of one is prepared: a graph built, allocated, and its
 * inputs filled with seeded values (quantized weights as ggml's quantizer makes them). Not project code:
 * measuring aids.
 */
import type { Backend, Device } from "@effect-gpu/core"
import { DType, Graph, Quant, Tensor } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import type * as TfCore from "@tensorflow/tfjs-core"
import type { Scope } from "effect"
import { Effect } from "effect"

export interface Work {
  readonly flops?: number
  /** bytes that must move through memory at least once */
  readonly bytes?: number
  readonly nodes?: number
  readonly dtype?: "f32" | "f16"
}

export interface Case {
  readonly name: string
  readonly size: string
  readonly work: Work
  readonly ours: (
    device: Device.Device,
    backend: Backend.Backend
  ) => Effect.Effect<Effect.Effect<void, unknown>, unknown, Scope.Scope>
  readonly peer?: (tf: typeof TfCore) => () => void
}

export interface PrepareOptions {
  /** each param (weight) in a buffer of its own */
  readonly ownParams: boolean
  /** the graph's leafs in a buffer of their own (default: the backend's) */
  readonly leafBuffer?: boolean
}

/** our side of a case: the graph built and allocated, inputs filled; the effect computes once */
export const prepare = (
  backend: Backend.Backend,
  build: (g: Graph.Builder) => Effect.Effect<void, unknown>,
  options: PrepareOptions
) =>
  Effect.gen(function*() {
    const g = Graph.make()
    yield* build(g)
    const graph = backend.optimize(g.build())
    const own = options.ownParams ? graph.leafs.filter((t) => (t.flags & Tensor.Flags.param) !== 0) : []
    const bindings = yield* Effect.forEach(own, (tensor) =>
      Effect.map(
        backend.device.bufferType.allocate(backend.device.bufferType.allocSize(tensor)),
        (buffer) => ({ tensor, buffer, offset: 0 })
      ))
    const plan = yield* backend.allocate(graph, {
      bindings,
      ...(options.leafBuffer === undefined ? {} : { leafBuffer: options.leafBuffer })
    })
    let seed = 1
    for (const leaf of graph.leafs) {
      const n = leaf.ne[0] * leaf.ne[1] * leaf.ne[2] * leaf.ne[3]
      if (leaf.dtype === "i32") yield* plan.set(leaf, Generators.indices(seed++, n, leaf.ne[0]))
      else {
        const values = Generators.values(seed++, n, { min: 0.05, max: 0.5 })
        yield* plan.set(leaf, DType.isQuantized(leaf.dtype) ? Quant.unsafeQuantize(leaf.dtype, values) : values)
      }
    }
    // compute returns once the GPU is done: a run is one submit and its wait
    return backend.compute(plan)
  })

/**
 * `run` once (it creates the pipelines), then again for `ms` of load: the GPU's SM clock idles low while
 * the host makes the inputs and climbs only under load, so a few runs first left probes timing at the idle
 * clock (benchmarks/RESULTS.md, runs fq and fr)
 */
export const warmUp = <E, R>(run: Effect.Effect<unknown, E, R>, ms = 1500) =>
  Effect.gen(function*() {
    yield* run
    const start = performance.now()
    while (performance.now() - start < ms) yield* run
  })

/** the middle value of `xs` */
export const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/**
 * `run` warmed up, then traced `reps` times: each kernel's median GPU time in us, keyed by its name and
 * variant (its bindings left off), in the order the first trace met them
 */
export const kernelTimes = <E, R>(backend: Backend.Backend, run: Effect.Effect<unknown, E, R>, reps: number) =>
  Effect.gen(function*() {
    yield* warmUp(run)
    const times = new Map<string, Array<number>>()
    for (let r = 0; r < reps; r++) {
      const trace = yield* backend.captureNext
      yield* run
      for (const e of (yield* trace).entries) {
        const key = e.kernel.split("|")[0]
        times.set(key, [...(times.get(key) ?? []), (e.gpuTimeNs ?? 0) / 1e3])
      }
    }
    return [...times.entries()].map(([kernel, us]) => ({ kernel, us: median(us) }))
  })
