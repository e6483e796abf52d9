import { Cpu, Graph, Ledger, Ops, Registry } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, ScopedRef } from "effect"

describe("scoped resources", () => {
  it.live(
    "10 000 buffers allocated and released in scopes, some failing or interrupted, leave nothing live",
    () =>
      Effect.gen(function*() {
        const device = yield* Registry.bestDevice
        let failed = 0
        let interrupted = 0
        for (let i = 0; i < 10_000; i++) {
          const use = Effect.scoped(Effect.gen(function*() {
            const a = yield* device.bufferType.allocate(64 + (i % 7) * 32)
            const b = yield* device.bufferType.allocate(16)
            yield* a.set(0, new Uint8Array([i & 0xff]))
            if (i % 10 === 3) return yield* Effect.fail("boom" as const)
            if (i % 10 === 7) yield* Effect.never
            return b.size
          }))
          if (i % 10 === 7) {
            const fiber = yield* Effect.fork(use)
            yield* Effect.yieldNow()
            const exit = yield* Fiber.interrupt(fiber)
            if (Exit.isInterrupted(exit)) interrupted++
          } else {
            const exit = yield* Effect.exit(use)
            if (Exit.isFailure(exit)) failed++
          }
        }
        assert.strictEqual(failed, 1000)
        assert.strictEqual(interrupted, 1000)
        const s = device.ledger.snapshot()
        assert.strictEqual(s.buffers, 0)
        assert.strictEqual(s.bytes, 0)
      }).pipe(Effect.provide(Cpu.layer())),
    120_000
  )

  it.live(
    "backends, events and plans are released with their scope, also when a compute is interrupted",
    () =>
      Effect.gen(function*() {
        const device = yield* Registry.bestDevice
        const inner = Effect.scoped(Effect.gen(function*() {
          const backend = yield* device.makeBackend()
          const ev = yield* device.makeEvent
          const g = Graph.make()
          let t = yield* g.input("x", "f32", [64, 64])
          for (let i = 0; i < 400; i++) t = yield* Ops.softMax(Ops.mulMat(t, t))
          yield* g.output(t)
          const plan = yield* backend.allocate(g)
          yield* plan.set(g.build().leafs[0], new Float32Array(64 * 64).fill(0.01))
          assert.isAbove(device.ledger.snapshot().buffers, 0)
          yield* backend.recordEvent(ev)
          const t0 = Date.now()
          yield* backend.compute(plan)
          const full = Date.now() - t0
          const t1 = Date.now()
          const fiber = yield* Effect.fork(backend.compute(plan))
          yield* Effect.sleep("30 millis")
          yield* Fiber.interrupt(fiber)
          // the abort stopped the graph early: far sooner than a whole compute
          assert.isBelow(
            Date.now() - t1,
            full / 2,
            `aborted after ${Date.now() - t1} ms, a full compute takes ${full} ms`
          )
          // still usable after the abort
          const g2 = Graph.make()
          const x = yield* g2.input("x", "f32", [2])
          const y = yield* g2.output(Ops.scale(x, 3))
          const p2 = yield* backend.allocate(g2)
          yield* p2.set(x, [1, 2])
          yield* backend.compute(p2)
          assert.deepStrictEqual(Array.from(yield* p2.get(y)), [3, 6])
        }))
        yield* inner
        assert.isTrue(Ledger.isEmpty(device.ledger.snapshot()), JSON.stringify(device.ledger.snapshot()))
      }).pipe(Effect.provide(Cpu.layer())),
    60_000
  )
})

describe("backends inside uninterruptible acquisitions", () => {
  it.scoped("a backend made in a ScopedRef (acquired uninterruptibly) is released when the ref closes", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      yield* Effect.scoped(Effect.gen(function*() {
        const ref = yield* ScopedRef.fromAcquire(device.makeBackend())
        yield* (yield* ScopedRef.get(ref)).synchronize
        assert.strictEqual(device.ledger.snapshot().backends, 1)
      }))
      assert.strictEqual(device.ledger.snapshot().backends, 0)
    }).pipe(Effect.provide(Cpu.layer())))
})
