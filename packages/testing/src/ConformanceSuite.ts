/**
 * Registers the conformance suite with vitest for any backend: give the layer that provides it and the
 * name of the device to test. Each case becomes a test; lifecycle checks (scoped release, interruption,
 * event ordering) follow.
 *
 * @since 0.1.0
 */
import * as Registry from "@effect-gpu/core/Registry"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Compare from "./Compare.js"
import * as Conformance from "./Conformance.js"
import * as Gen from "./Generators.js"
import { chain, computeOn, realSleep, tests as contractTests } from "./internal/contract.js"
import * as LeakCheck from "./LeakCheck.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** the device under test, by registry name */
  readonly device: string
  /** test f16 kernels too */
  readonly f16: boolean
  /** only cases whose name matches */
  readonly filter?: RegExp
  /** skip the whole suite (say why in `skipReason`) */
  readonly skip?: boolean
  readonly seed?: number
}

/**
 * @since 0.1.0
 * @category suites
 */
export const conformance = <E>(layer: Layer.Layer<Registry.Registry, E>, options: Options): void => {
  const cases = Conformance.cases({ f16: options.f16 }).filter((c) => options.filter?.test(c.name) ?? true)
  describe.skipIf(options.skip ?? false)(`conformance of ${options.device} against the CPU reference`, () => {
    contract(layer, { device: options.device })
    it.layer(layer, { timeout: "120 seconds" })((it) => {
      for (const c of cases) {
        it.scoped(c.name, () =>
          Effect.gen(function*() {
            const device = yield* Registry.deviceByName(options.device)
            const tested = yield* device.makeBackend()
            const reference = yield* Conformance.referenceBackend
            const outcome = yield* Conformance.run(c, tested, reference, options.seed ?? 1)
            assert.isTrue(outcome.passed, `${c.name}: ${outcome.detail}`)
          }))
      }

      it.scoped("lifecycle: buffers, backends, events and plans are released with their scope", () =>
        Effect.gen(function*() {
          const device = yield* Registry.deviceByName(options.device)
          yield* LeakCheck.check(Effect.gen(function*() {
            const backend = yield* device.makeBackend()
            yield* device.makeEvent
            yield* device.bufferType.allocate(1024)
            yield* computeOn(device, 8, 2)
            yield* backend.synchronize
          }))
        }))

      it.scoped("lifecycle: an interrupted compute stops, leaks nothing, and the backend works after", () =>
        Effect.gen(function*() {
          const device = yield* Registry.deviceByName(options.device)
          yield* LeakCheck.check(Effect.gen(function*() {
            const backend = yield* device.makeBackend()
            const { g, x } = yield* chain(64, 200)
            const plan = yield* backend.allocate(g)
            yield* plan.set(x, Gen.values(3, 64 * 64))
            const fiber = yield* Effect.fork(backend.compute(plan))
            yield* realSleep(10)
            yield* Fiber.interrupt(fiber)
            const reference = yield* computeOn(yield* Conformance.referenceDevice, 8, 2)
            const after = yield* computeOn(device, 8, 2)
            assert.isBelow(Compare.nmse(after, reference), 1e-6)
          }))
        }))

      it.scoped("lifecycle: an event orders one backend's work after another's", () =>
        Effect.gen(function*() {
          const device = yield* Registry.deviceByName(options.device)
          const b0 = yield* device.makeBackend()
          const b1 = yield* device.makeBackend()
          const { g, x, y } = yield* chain(24, 8)
          const p0 = yield* b0.allocate(g)
          const p1 = yield* b1.allocate(g)
          yield* p0.set(x, Gen.values(5, 24 * 24))
          const ev = yield* device.makeEvent
          yield* b0.computeAsync(p0)
          yield* b0.recordEvent(ev)
          yield* b1.waitEvent(ev)
          yield* b1.copyAsync(p0.location(y)!, p1.location(x)!)
          assert.deepStrictEqual(Array.from(yield* p1.get(x)), Array.from(yield* p0.get(y)))
        }))
    })
  })
}

/**
 * Registers the contract every backend owes its users with vitest, beyond the numbers of each op: reads
 * of intermediates fail with NotAnOutput, released resources with Released, compute waits for its results
 * and stops within a second when interrupted, indices out of range fail at set or read zeros, empty and
 * oversized tensors, and how `plan.set` takes host data. `conformance` includes it.
 *
 * @since 0.1.0
 * @category suites
 */
export const contract = <E>(
  layer: Layer.Layer<Registry.Registry, E>,
  options: { readonly device: string; readonly skip?: boolean }
): void => {
  describe.skipIf(options.skip ?? false)(`the contract of ${options.device}`, () => {
    it.layer(layer, { timeout: "120 seconds" })((it) => {
      for (const t of contractTests) {
        it.effect(t.name, () => Effect.flatMap(Registry.deviceByName(options.device), (device) => t.run(device, layer)))
      }
    })
  })
}
