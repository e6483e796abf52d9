/**
 * The oracle's comparison, shared by Oracle.test.ts and bench/probes/oracle-check.ts (the same models on a
 * GPU machine): our log-probabilities at every prompt position and at each of llama.cpp's greedy steps
 * (fed llama.cpp's tokens, so that one step's choice does not decide the next's input), then our own greedy
 * continuation, judged against llama.cpp's answers (tools/llama-oracle writes them to llama.cpp.json).
 */
import type { Device } from "@effect-gpu/core"
import { Context, Fixture, Gguf, Hyperparameters, Sampler, Weights } from "@effect-gpu/llm"
import { Effect } from "effect"
import { continuation, prompt } from "./cases.js"

/** llama.cpp's answers for one model: each position's likeliest tokens, its greedy steps and their margins */
export interface Answers {
  readonly positions: ReadonlyArray<ReadonlyArray<readonly [token: number, logProbability: number]>>
  readonly greedy: ReadonlyArray<number>
  readonly margins: ReadonlyArray<number>
}

/**
 * How far a log-probability may be from llama.cpp's. With f32 and f16 weights the difference is rounding
 * (under 1e-3 here). Quantized products round their activations to 8-bit blocks, and a tiny difference
 * upstream (rope, the order of sums) moves some values across a rounding step: llama.cpp's own two
 * attention paths (flash attention on and off) differ by 0.011 on these models, and we stay within 0.03.
 */
export const bound = (dtype: string) => (dtype === "f32" || dtype === "f16" ? 0.002 : 0.03)

/** our log-probabilities at the prompt's positions and at llama.cpp's greedy steps, and our greedy tokens */
export const run = (device: Device.Device, options: Fixture.Options, forced: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const bytes = Fixture.make(options)
    const file = yield* Gguf.parse(bytes)
    const h = yield* Hyperparameters.fromGguf(file)
    const weights = yield* Weights.load(device, file, bytes)
    const context = yield* Context.make(device, h, weights, { size: 64 })
    const all = yield* context.evaluate(prompt, { allLogits: true })
    const positions = prompt.map((_, i) => Sampler.logSoftmax(all.subarray(i * h.vocab, (i + 1) * h.vocab)))
    const steps: Array<Float64Array> = []
    let last = prompt[prompt.length - 1]
    yield* context.truncate(prompt.length - 1)
    for (const next of forced) {
      steps.push(Sampler.logSoftmax(yield* context.evaluate([last])))
      last = next
    }
    yield* context.truncate(prompt.length - 1)
    const greedy: Array<number> = []
    last = prompt[prompt.length - 1]
    for (let i = 0; i < continuation; i++) {
      last = Sampler.argmax(yield* context.evaluate([last]))
      greedy.push(last)
    }
    return { positions, steps, greedy }
  })

/**
 * Our answers against llama.cpp's within `limit`: the largest log-probability difference over each
 * position's listed tokens, the positions whose likeliest token is clear (its margin over the runner-up
 * beyond the limit), and every disagreement: a clear choice that is not ours, a near tie whose choice is
 * beyond the limit of our likeliest, a greedy token before llama.cpp's first near tie that is not ours
 */
export const judge = (
  ours: Effect.Effect.Success<ReturnType<typeof run>>,
  want: Answers,
  limit: number
) => {
  const disagreements: Array<string> = []
  const sameChoice = (logp: Float64Array, theirs: number, margin: number, what: string) => {
    const top = Sampler.argmax(logp)
    if (margin >= limit && top !== theirs) disagreements.push(`${what}: ${top}, llama.cpp ${theirs}`)
    if (margin < limit && logp[theirs] < logp[top] - limit) {
      disagreements.push(`${what} (a near tie, margin ${margin}): ${top}, llama.cpp ${theirs}`)
    }
    return margin >= limit
  }
  let worst = 0
  let decisive = 0
  want.positions.forEach((top, i) => {
    if (sameChoice(ours.positions[i], top[0][0], top[0][1] - top[1][1], `likeliest at ${i}`)) decisive++
    for (const [token, logp] of top) worst = Math.max(worst, Math.abs(ours.positions[i][token] - logp))
  })
  want.greedy.forEach((token, i) => sameChoice(ours.steps[i], token, want.margins[i], `greedy step ${i}`))
  // running freely, our continuation is llama.cpp's up to its first near tie
  const tie = want.margins.findIndex((m) => m < limit)
  const clear = tie === -1 ? continuation : tie
  const mine = ours.greedy.slice(0, clear).join(",")
  const theirs = want.greedy.slice(0, clear).join(",")
  if (mine !== theirs) disagreements.push(`greedy continuation: ${mine}, llama.cpp ${theirs}`)
  return { worst, decisive, disagreements }
}
