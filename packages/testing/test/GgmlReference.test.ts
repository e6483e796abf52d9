import { Cpu, Registry } from "@effect-gpu/core"
import { GgmlReference } from "@effect-gpu/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { loadReference } from "./reference.js"

const suite = loadReference()

describe("ggml reference cases on the CPU backend", () => {
  it("has all 67 cases", () => {
    assert.strictEqual(suite.cases.length, 67)
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
