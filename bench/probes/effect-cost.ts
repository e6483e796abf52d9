/**
 * What the Effect layer costs per call, without a GPU: compute and synchronize of a one-node graph on
 * the CPU backend, and the Effect primitives on that path (a span, the backend's lock). The part of a
 * GPU compute's host time that is not Dawn's. A measuring aid.
 *
 *   tsx effect-cost.ts [iterations]
 */
import { Cpu, Graph, Ops } from "@effect-gpu/core"
import { Effect } from "effect"

const iterations = Number(process.argv[2] ?? 50000)

const time = (label: string, body: Effect.Effect<void, unknown>) =>
  Effect.gen(function*() {
    for (let i = 0; i < iterations / 10; i++) yield* body
    const t = performance.now()
    for (let i = 0; i < iterations; i++) yield* body
    console.log(`${label.padEnd(40)} ${((performance.now() - t) / iterations * 1e3).toFixed(2)} us`)
  })

const main = Effect.gen(function*() {
  const lock = yield* Effect.makeSemaphore(1)
  yield* time("Effect.void", Effect.void)
  yield* time("withSpan", Effect.withSpan(Effect.void, "x", { captureStackTrace: false }))
  yield* time("useSpan", Effect.useSpan("x", { captureStackTrace: false }, () => Effect.void))
  const fn = Effect.fn("x")(function*() {
    yield* Effect.void
  })
  yield* time("Effect.fn (span and call-site trace)", fn())
  yield* time("semaphore withPermits(1)", lock.withPermits(1)(Effect.void))
  const backend = yield* Cpu.make().makeBackend()
  const g = Graph.make()
  const x = yield* g.input("x", "f32", [256])
  const c = yield* g.input("c", "f32", [256])
  yield* g.output(Ops.add(x, c))
  const plan = yield* backend.allocate(g.build())
  for (let round = 0; round < 2; round++) {
    yield* time("CPU backend: compute", backend.compute(plan))
    yield* time("CPU backend: synchronize", backend.synchronize)
    yield* time("CPU backend: compute + synchronize", Effect.zipRight(backend.compute(plan), backend.synchronize))
  }
})

Effect.runPromise(Effect.scoped(main)).then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
