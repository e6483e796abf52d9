/**
 * The inference service. At startup it builds the device layer it is given, loads the weights into a
 * weights buffer on the best device, and allocates one plan. A request runs the plan; if the device is
 * lost the request fails with DeviceLost (the server answers 503) and the service rebuilds the device
 * layer and reloads the model, so the next request is served again.
 */
import type { GpuError } from "@effect-gpu/core"
import { Plan, Registry } from "@effect-gpu/core"
import { Context, Effect, Layer, ScopedRef } from "effect"
import * as Mlp from "./Mlp.js"

export interface Prediction {
  readonly device: string
  readonly probabilities: ReadonlyArray<ReadonlyArray<number>>
  readonly classes: ReadonlyArray<number>
}

export interface Service {
  readonly infer: (rows: ReadonlyArray<ReadonlyArray<number>>) => Effect.Effect<Prediction, GpuError.GpuError>
  readonly device: Effect.Effect<string>
}

export class Inference extends Context.Tag("http-inference/Inference")<Inference, Service>() {}

/** one loaded model: its device, backend, weights and plan, alive as long as its scope */
const load = <E>(devices: Layer.Layer<Registry.Registry, E>) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(devices)
    const device = yield* Registry.bestDevice.pipe(Effect.provide(context))
    const backend = yield* device.makeBackend()
    const model = yield* Mlp.build
    const w = Mlp.weights()
    // the weights live in a buffer of their own, placed once; the compute plan binds them
    const { b1, b2, w1, w2 } = model.params
    const bindings = yield* Plan.bind(device.bufferType, [w1, b1, w2, b2])
    const data = [w.w1, w.b1, w.w2, w.b2]
    for (const [i, b] of bindings.entries()) yield* b.buffer.set(b.offset, new Uint8Array(data[i].buffer))
    const plan = yield* backend.allocate(model.graph, { bindings })
    const lock = yield* Effect.makeSemaphore(1)
    return { device: device.name, backend, plan, model, lock }
  })

export const layer = <E>(devices: Layer.Layer<Registry.Registry, E>): Layer.Layer<Inference, E | GpuError.GpuError> =>
  Layer.scoped(
    Inference,
    Effect.gen(function*() {
      const ref = yield* ScopedRef.fromAcquire(load(devices))
      const run = (rows: ReadonlyArray<ReadonlyArray<number>>) =>
        Effect.gen(function*() {
          const m = yield* ScopedRef.get(ref)
          return yield* m.lock.withPermits(1)(Effect.gen(function*() {
            const x = new Float32Array(Mlp.INPUT * Mlp.MAX_BATCH)
            rows.forEach((r, j) => x.set(r, j * Mlp.INPUT))
            yield* m.plan.set(m.model.x, x)
            yield* m.backend.compute(m.plan)
            const out = yield* m.plan.get(m.model.probs)
            const probabilities = rows.map((_, j) => Array.from(out.subarray(j * Mlp.CLASSES, (j + 1) * Mlp.CLASSES)))
            const classes = probabilities.map((p) => p.indexOf(Math.max(...p)))
            return { device: m.device, probabilities, classes }
          }))
        })
      return {
        device: Effect.map(ScopedRef.get(ref), (m) => m.device),
        infer: (rows) =>
          run(rows).pipe(
            // a lost device: rebuild the device layer for the next request, and report this one
            Effect.tapErrorTag("DeviceLost", () =>
              ScopedRef.set(ref, load(devices)).pipe(
                Effect.catchAll((e) => Effect.logWarning(`reloading the model failed: ${e}`))
              )),
            Effect.withSpan("Inference.infer", { attributes: { rows: rows.length } })
          )
      }
    })
  )
