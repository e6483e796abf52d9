import { Sampler } from "@effect-gpu/llm"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"

/** logits whose softmax is `ps` */
const logitsOf = (ps: ReadonlyArray<number>) => Float32Array.from(ps, Math.log)

/** how often each token is drawn in `n` draws */
const frequencies = (sampler: Sampler.Sampler, logits: Float32Array, n: number) => {
  const counts = new Array<number>(logits.length).fill(0)
  for (let i = 0; i < n; i++) counts[sampler.sample(logits, [])]++
  return counts.map((c) => c / n)
}

const ps = [0.5, 0.3, 0.15, 0.05]
const all = { topK: 0, topP: 1, minP: 0 }

describe("sampling", () => {
  it.effect("temperature 0 and top-k 1 are greedy; a seed repeats its draws", () =>
    Effect.gen(function*() {
      const logits = Float32Array.from([0.1, 3, -1, 2.9, 3])
      const greedy = yield* Sampler.make({ temperature: 0 })
      assert.strictEqual(greedy.sample(logits, []), 1)
      assert.strictEqual(Sampler.argmax(logits), 1)
      // the logits' argmax whatever the history (a context may take it on the device) only without penalties
      assert.isTrue(greedy.greedy)
      assert.isFalse((yield* Sampler.make({ temperature: 0, repeatPenalty: 1.1 })).greedy)
      assert.isTrue((yield* Sampler.make({ temperature: 0, repeatPenalty: 1.1, repeatLastN: 0 })).greedy)
      assert.isFalse((yield* Sampler.make({ temperature: 0.7 })).greedy)
      const top1 = yield* Sampler.make({ temperature: 1, topK: 1, seed: 1 })
      for (let i = 0; i < 20; i++) assert.strictEqual(top1.sample(logits, []), 1)
      const draws = (seed: number) =>
        Effect.map(Sampler.make({ temperature: 1, ...all, seed }), (s) =>
          Array.from({ length: 32 }, () => s.sample(logits, [])))
      assert.deepStrictEqual(yield* draws(7), yield* draws(7))
      assert.notDeepEqual(yield* draws(7), yield* draws(8))
    }))

  it.effect("draws follow softmax(logits / temperature)", () =>
    Effect.gen(function*() {
      const plain = frequencies(yield* Sampler.make({ temperature: 1, ...all, seed: 3 }), logitsOf(ps), 20000)
      plain.forEach((f, i) => assert.closeTo(f, ps[i], 0.015, `token ${i}`))
      // at temperature 0.5 the probabilities are squared, then normalized
      const sharp = frequencies(yield* Sampler.make({ temperature: 0.5, ...all, seed: 4 }), logitsOf(ps), 20000)
      const squared = ps.map((p) => p * p)
      const sum = squared.reduce((a, b) => a + b, 0)
      sharp.forEach((f, i) => assert.closeTo(f, squared[i] / sum, 0.015, `token ${i} at 0.5`))
    }))

  it.effect("top-k, top-p and min-p keep only their candidates", () =>
    Effect.gen(function*() {
      const logits = logitsOf(ps)
      const topK = frequencies(yield* Sampler.make({ temperature: 1, ...all, topK: 2, seed: 5 }), logits, 4000)
      assert.deepStrictEqual(topK.map((f) => f > 0), [true, true, false, false])
      assert.closeTo(topK[0], 0.5 / 0.8, 0.03)
      // 0.5 + 0.3 reaches 0.8
      const topP = frequencies(yield* Sampler.make({ temperature: 1, ...all, topP: 0.8, seed: 6 }), logits, 4000)
      assert.deepStrictEqual(topP.map((f) => f > 0), [true, true, false, false])
      // at least 0.2 × 0.5 = 0.1
      const minP = frequencies(yield* Sampler.make({ temperature: 1, ...all, minP: 0.2, seed: 7 }), logits, 4000)
      assert.deepStrictEqual(minP.map((f) => f > 0), [true, true, true, false])
    }))

  it.effect("penalties push recent tokens down", () =>
    Effect.gen(function*() {
      const logits = Float32Array.from([2, 1.9, -1, -1.05])
      const penalized = yield* Sampler.make({ temperature: 0, repeatPenalty: 1.5 })
      assert.strictEqual(penalized.sample(logits, [0]), 1)
      assert.strictEqual(penalized.sample(logits, [5, 5]), 0) // outside the vocabulary: ignored
      // a negative logit is multiplied: -1 × 1.5 falls below -1.05
      assert.strictEqual(penalized.sample(Float32Array.from([-1, -1.05]), [0]), 1)
      const window = yield* Sampler.make({ temperature: 0, repeatPenalty: 1.5, repeatLastN: 1 })
      assert.strictEqual(window.sample(logits, [0, 1]), 0) // only the last token counts
      const frequency = yield* Sampler.make({ temperature: 0, frequencyPenalty: 0.06 })
      assert.strictEqual(frequency.sample(logits, [0]), 0)
      assert.strictEqual(frequency.sample(logits, [0, 0]), 1)
      // the caller's logits are left as they were
      assert.deepStrictEqual(Array.from(logits), Array.from(Float32Array.from([2, 1.9, -1, -1.05])))
    }))

  it.effect("options out of range fail with InvalidSampling", () =>
    Effect.gen(function*() {
      for (
        const [options, option] of [
          [{ temperature: -1 }, "temperature"],
          [{ topK: 1.5 }, "topK"],
          [{ topP: 0 }, "topP"],
          [{ minP: 2 }, "minP"],
          [{ repeatPenalty: 0 }, "repeatPenalty"],
          [{ seed: Number.NaN }, "seed"]
        ] as const
      ) {
        const exit = yield* Effect.exit(Sampler.make(options))
        assert.isTrue(Exit.isFailure(exit), option)
        assert.include(String(exit), `InvalidSampling`)
        assert.include(String(exit), option)
      }
    }))

  it("log-softmax gives log-probabilities", () => {
    const log = Sampler.logSoftmax(logitsOf(ps))
    ps.forEach((p, i) => assert.closeTo(log[i], Math.log(p), 1e-6))
  })
})
