import { Registry } from "@effect-gpu/core"
import { GgmlReference } from "@effect-gpu/testing"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { loadReference } from "../../testing/test/reference.js"
import { adapterAvailable } from "./utils.js"

const suite = loadReference("ggml-next")

describe.skipIf(!adapterAvailable)("ggml's next cases (quantized types, attention, experts) on WebGPU", () => {
  it.layer(WebGpu.layer({ devices: 1 }))((it) => {
    for (const c of suite.cases) {
      it.scoped(c.name, () =>
        Effect.gen(function*() {
          const device = yield* Registry.deviceByName("WebGPU0")
          const backend = yield* device.makeBackend()
          const outcome = yield* GgmlReference.run(suite, c, backend)
          assert.isTrue(outcome.passed, `${c.name}: ${outcome.detail} (bound ${outcome.bound})`)
        }))
    }
  })
})
