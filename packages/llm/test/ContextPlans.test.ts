import { Cpu, Registry } from "@effect-gpu/core"
import { Context, Fixture, Gguf, Hyperparameters, Weights } from "@effect-gpu/llm"
import { LeakCheck } from "@effect-gpu/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

const bytes = Fixture.make({
  architecture: "llama",
  dtype: "f32",
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  ffn: 96,
  vocab: 300
})
const tokens = [1, 5, 260, 42, 7, 299, 3, 77, 12, 150, 9, 31]

describe("a context's plans", () => {
  it.effect("past `plans`, the least recently used is released with its memory, and made again when met", () =>
    LeakCheck.check(Effect.gen(function*() {
      const [device] = yield* Registry.devices
      const file = yield* Gguf.parse(bytes)
      const h = yield* Hyperparameters.fromGguf(file)
      const weights = yield* Weights.load(device, file, bytes)
      const context = yield* Context.make(device, h, weights, { size: 64, plans: 4 })
      // prompts of ever other lengths, as a server meets them: each length compiles a plan
      const prompt = (n: number) => Effect.zipRight(context.truncate(0), context.evaluate(tokens.slice(0, n)))
      const first = yield* prompt(3)
      for (const n of [4, 5, 6]) yield* prompt(n)
      const atFour = device.ledger.snapshot()
      for (const n of [7, 8, 9, 10, 11, 12]) yield* prompt(n)
      const atTen = device.ledger.snapshot()
      // four plans' memory, not ten's
      assert.isAtMost(atTen.buffers, atFour.buffers)
      assert.isAtMost(atTen.bytes, atFour.bytes * 1.5)
      // the first length's plan was let go; made again, it gives the same logits
      assert.deepStrictEqual(Array.from(yield* prompt(3)), Array.from(first))
      const refused = yield* Effect.flip(Context.make(device, h, weights, { plans: 2 }))
      assert.include(refused.message, "context option plans must be an integer from 4, not 2")
    })).pipe(Effect.provide(Cpu.layer())))
})
