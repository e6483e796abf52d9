import { Registry } from "@effect-gpu/core"
import { GgmlReference } from "@effect-gpu/testing"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { loadReference } from "../../testing/test/reference.js"
import { adapterAvailable } from "./utils.js"

// ggml's core cases, and its next ones (quantized types, attention, experts)
for (const set of ["ggml", "ggml-next"] as const) {
  const suite = loadReference(set)

  describe.skipIf(!adapterAvailable)(`${set} reference cases on WebGPU`, () => {
    it.layer(WebGpu.layer({ devices: 1 }))((it) => {
      for (const c of suite.cases) {
        it.scoped(c.name, () =>
          Effect.gen(function*() {
            const device = yield* Registry.deviceByName("WebGPU0")
            const backend = yield* device.makeBackend()
            // and again with the inputs in a buffer of their own (bound read-only wherever nothing writes them)
            for (const leafBuffer of [false, true]) {
              const outcome = yield* Effect.scoped(GgmlReference.run(suite, c, backend, { leafBuffer }))
              assert.isTrue(
                outcome.passed,
                `${c.name}, leafBuffer ${leafBuffer}: ${outcome.detail} (bound ${outcome.bound})`
              )
            }
          }))
      }
    })
  })
}
