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
import type * as Layer from "effect/Layer"
import * as Conformance from "./Conformance.js"

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
    })
  })
}
