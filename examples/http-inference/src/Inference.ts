/**
 * The inference service. At startup it builds the device layer it is given, loads the weights into a
 * weights buffer on the best device, and allocates one plan of MAX_BATCH rows. Requests wait in a queue;
 * one worker takes as many as fit the plan's rows (first come, first served, a request never split) and
 * answers them all with one compute, so throughput grows with the number of clients. If the device is
 * lost, the requests of that compute fail with DeviceLost (the server answers 503) and the service
 * rebuilds the device layer and reloads the model, so the next requests are served again.
 */
import type { GpuError } from "@effect-gpu/core"
import { Plan, Registry } from "@effect-gpu/core"
import { Context, Deferred, Effect, Layer, Queue, ScopedRef } from "effect"
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
    return { device: device.name, backend, plan, model }
  })

/** a macrotask turn: lets I/O callbacks (requests arriving) run before the worker goes on */
const ioTurn = Effect.async<void>((resume) => {
  setImmediate(() => resume(Effect.void))
})

/** a request waiting for the worker */
interface Pending {
  readonly rows: ReadonlyArray<ReadonlyArray<number>>
  readonly done: Deferred.Deferred<Prediction, GpuError.GpuError>
}

export const layer = <E>(devices: Layer.Layer<Registry.Registry, E>): Layer.Layer<Inference, E | GpuError.GpuError> =>
  Layer.scoped(
    Inference,
    Effect.gen(function*() {
      const ref = yield* ScopedRef.fromAcquire(load(devices))
      const queue = yield* Effect.acquireRelease(Queue.unbounded<Pending>(), Queue.shutdown)
      // a request taken that did not fit the last batch opens the next one
      let carried: Pending | undefined

      /** the next batch: the oldest request, then those behind it while their rows fit MAX_BATCH */
      const nextBatch = Effect.gen(function*() {
        const batch = [carried ?? (yield* Queue.take(queue))]
        carried = undefined
        // one turn of the event loop first: requests whose bytes have arrived join this batch (a CPU
        // compute is synchronous, so without it each would run alone)
        yield* ioTurn
        let rows = batch[0].rows.length
        while (true) {
          const next = yield* Queue.poll(queue)
          if (next._tag === "None") break
          if (rows + next.value.rows.length > Mlp.MAX_BATCH) {
            carried = next.value
            break
          }
          batch.push(next.value)
          rows += next.value.rows.length
        }
        // requests whose clients went away are dropped before the compute
        const live: Array<Pending> = []
        for (const p of batch) if (!(yield* Deferred.isDone(p.done))) live.push(p)
        return live
      })

      /** one compute for a batch: rows packed one after another, the rest of the plan's rows zero */
      const serve = (batch: ReadonlyArray<Pending>) =>
        Effect.gen(function*() {
          const m = yield* ScopedRef.get(ref)
          const x = new Float32Array(Mlp.INPUT * Mlp.MAX_BATCH)
          let j = 0
          for (const p of batch) for (const r of p.rows) x.set(r, Mlp.INPUT * j++)
          yield* m.plan.set(m.model.x, x)
          // computeAsync and the read after it: one wait for the device, not two
          yield* m.backend.computeAsync(m.plan)
          const out = yield* m.plan.get(m.model.probs)
          let k = 0
          for (const p of batch) {
            const probabilities = p.rows.map(() => Array.from(out.subarray(Mlp.CLASSES * k, Mlp.CLASSES * ++k)))
            const classes = probabilities.map((q) => q.indexOf(Math.max(...q)))
            yield* Deferred.succeed(p.done, { device: m.device, probabilities, classes })
          }
        }).pipe(
          Effect.catchAll((e) =>
            Effect.gen(function*() {
              for (const p of batch) yield* Deferred.fail(p.done, e)
              // a lost device: rebuild the device layer for the next requests
              if (e._tag === "DeviceLost") {
                yield* ScopedRef.set(ref, load(devices)).pipe(
                  Effect.catchAll((reload) => Effect.logWarning(`reloading the model failed: ${reload}`))
                )
              }
            })
          ),
          Effect.withSpan("Inference.batch", { attributes: { requests: batch.length } })
        )

      yield* Effect.forkScoped(Effect.forever(Effect.flatMap(nextBatch, serve)))

      return {
        device: Effect.map(ScopedRef.get(ref), (m) => m.device),
        infer: (rows) =>
          Effect.gen(function*() {
            const done = yield* Deferred.make<Prediction, GpuError.GpuError>()
            yield* Queue.offer(queue, { rows, done })
            // a client that goes away marks its request done, so the worker drops it
            return yield* Deferred.await(done).pipe(Effect.onInterrupt(() => Deferred.interrupt(done)))
          }).pipe(Effect.withSpan("Inference.infer", { attributes: { rows: rows.length } }))
      }
    })
  )
