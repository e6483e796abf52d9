import { Cpu, Registry } from "@effect-gpu/core"
import { GgmlReference } from "@effect-gpu/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { loadReference } from "./reference.js"

// ggml's core cases, and its next ones (quantized types, attention, experts)
for (const [set, count] of [["ggml", 67], ["ggml-next", 70]] as const) {
  const suite = loadReference(set)

  describe(`${set} reference cases on the CPU backend`, () => {
    it(`has all ${count} cases`, () => {
      assert.strictEqual(suite.cases.length, count)
    })

    for (const c of suite.cases) {
      it.scoped(c.name, () =>
        Effect.gen(function*() {
          const device = yield* Registry.deviceByName("CPU")
          const backend = yield* device.makeBackend()
          const outcome = yield* GgmlReference.run(suite, c, backend)
          assert.isTrue(outcome.passed, `${c.name}: ${outcome.detail} (bound ${outcome.bound})`)
        }).pipe(Effect.provide(Cpu.layer())))
    }
  })
}
