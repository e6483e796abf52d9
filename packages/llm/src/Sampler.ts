/**
 * The next token from logits, as llama.cpp's sampler chain picks it: repetition penalties over the last
 * tokens, then top-k, top-p and min-p, then temperature, then a draw from a seeded generator; greedy
 * (the likeliest token) at temperature 0.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { heap } from "./internal/heap.js"
import { mulberry32 } from "./internal/random.js"

/**
 * A sampling option out of its range.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidSampling extends Schema.TaggedError<InvalidSampling>("@effect-gpu/llm/InvalidSampling")(
  "InvalidSampling",
  { option: Schema.String, value: Schema.Unknown, reason: Schema.String }
) {
  /** @since 0.1.0 */
  override get message(): string {
    return `sampling option ${this.option} = ${String(this.value)}: ${this.reason}`
  }
}

/**
 * llama.cpp's defaults where left out (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** 0: greedy */
  readonly temperature?: number
  /** keep the k likeliest (0: all) */
  readonly topK?: number
  /** keep the likeliest whose probabilities add up to p (1: all) */
  readonly topP?: number
  /** keep those at least this fraction of the likeliest's probability (0: all) */
  readonly minP?: number
  /** divides a positive logit and multiplies a negative one of each recent token (1: none) */
  readonly repeatPenalty?: number
  readonly frequencyPenalty?: number
  readonly presencePenalty?: number
  /** how many recent tokens the penalties look at */
  readonly repeatLastN?: number
  /** the generator's seed (default: from the clock) */
  readonly seed?: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Sampler {
  readonly options: Required<Options>
  /** the next token after `history` (the tokens so far) for these logits */
  readonly sample: (logits: Float32Array, history: ReadonlyArray<number>) => number
  /**
   * whether `sample` is the logits' argmax whatever the history (temperature 0, no penalties): a context
   * can then take it on the device (`Context.next`)
   */
  readonly greedy: boolean
}

/**
 * The index of the largest logit (the first of equals, as llama.cpp's greedy sampler).
 *
 * @since 0.1.0
 * @category sampling
 */
export const argmax = (logits: ArrayLike<number>): number => {
  let best = 0
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i
  return best
}

/**
 * Log-probabilities of logits (log-softmax, in float64).
 *
 * @since 0.1.0
 * @category sampling
 */
export const logSoftmax = (logits: ArrayLike<number>): Float64Array => {
  let max = -Infinity
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i])
  let sum = 0
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max)
  const log = max + Math.log(sum)
  return Float64Array.from(logits, (v) => v - log)
}

/** the indices of the k largest values (all for k = 0), largest first; a heap of k keeps it O(n log k) */
const likeliest = (values: Float32Array, k: number): Array<number> => {
  const before = (a: number, b: number) => values[a] > values[b] || (values[a] === values[b] && a < b)
  if (k === 0 || k >= values.length) {
    return Array.from({ length: values.length }, (_, i) => i).sort((a, b) => before(a, b) ? -1 : 1)
  }
  // the best k so far, the weakest of them first
  const best = heap<number>((a, b) => before(b, a))
  for (let i = 0; i < values.length; i++) {
    if (best.size < k) best.push(i)
    else if (before(i, best.peek()!)) best.replaceFirst(i)
  }
  const out: Array<number> = []
  while (best.size > 0) out.push(best.pop())
  return out.reverse()
}

const check = (
  option: string,
  value: number,
  ok: (v: number) => boolean,
  reason: string
): Effect.Effect<void, InvalidSampling> =>
  Number.isFinite(value) && ok(value) ? Effect.void : Effect.fail(new InvalidSampling({ option, value, reason }))

/**
 * A sampler; options out of range fail with InvalidSampling.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Sampler, InvalidSampling> =>
  Effect.gen(function*() {
    const o: Required<Options> = {
      temperature: options.temperature ?? 0.8,
      topK: options.topK ?? 40,
      topP: options.topP ?? 0.95,
      minP: options.minP ?? 0.05,
      repeatPenalty: options.repeatPenalty ?? 1,
      frequencyPenalty: options.frequencyPenalty ?? 0,
      presencePenalty: options.presencePenalty ?? 0,
      repeatLastN: options.repeatLastN ?? 64,
      seed: options.seed ?? Date.now()
    }
    yield* check("temperature", o.temperature, (v) => v >= 0, "must be 0 or more")
    yield* check("topK", o.topK, (v) => Number.isInteger(v) && v >= 0, "must be a whole number, 0 or more")
    yield* check("topP", o.topP, (v) => v > 0 && v <= 1, "must be in (0, 1]")
    yield* check("minP", o.minP, (v) => v >= 0 && v <= 1, "must be in [0, 1]")
    yield* check("repeatPenalty", o.repeatPenalty, (v) => v > 0, "must be more than 0")
    yield* check("frequencyPenalty", o.frequencyPenalty, () => true, "must be finite")
    yield* check("presencePenalty", o.presencePenalty, () => true, "must be finite")
    yield* check("repeatLastN", o.repeatLastN, (v) => Number.isInteger(v) && v >= 0, "must be a whole number")
    yield* check("seed", o.seed, Number.isInteger, "must be a whole number")
    const random = mulberry32(o.seed)

    const sample = (logits: Float32Array, history: ReadonlyArray<number>): number => {
      let values: Float32Array = logits
      const recent = o.repeatLastN === 0 ? [] : history.slice(-o.repeatLastN)
      if (recent.length > 0 && (o.repeatPenalty !== 1 || o.frequencyPenalty !== 0 || o.presencePenalty !== 0)) {
        values = Float32Array.from(logits)
        const counts = new Map<number, number>()
        for (const t of recent) counts.set(t, (counts.get(t) ?? 0) + 1)
        for (const [t, count] of counts) {
          if (t < 0 || t >= values.length) continue
          values[t] = values[t] > 0 ? values[t] / o.repeatPenalty : values[t] * o.repeatPenalty
          values[t] -= count * o.frequencyPenalty + o.presencePenalty
        }
      }
      if (o.temperature === 0) return argmax(values)
      // candidates, likeliest first
      let ids = likeliest(values, o.topK)
      const probabilities = (list: ReadonlyArray<number>, temperature: number) => {
        const max = values[list[0]]
        const ps = list.map((i) => Math.exp((values[i] - max) / temperature))
        const sum = ps.reduce((s, p) => s + p, 0)
        return ps.map((p) => p / sum)
      }
      if (o.topP < 1) {
        const ps = probabilities(ids, 1)
        let total = 0
        let keep = ids.length
        for (let i = 0; i < ps.length; i++) {
          total += ps[i]
          if (total >= o.topP) {
            keep = i + 1
            break
          }
        }
        ids = ids.slice(0, keep)
      }
      if (o.minP > 0) {
        const floor = values[ids[0]] + Math.log(o.minP)
        ids = ids.filter((i, n) => n === 0 || values[i] >= floor)
      }
      const ps = probabilities(ids, o.temperature)
      let r = random()
      for (let i = 0; i < ids.length; i++) {
        r -= ps[i]
        if (r < 0) return ids[i]
      }
      return ids[ids.length - 1]
    }
    const greedy = o.temperature === 0 &&
      (o.repeatLastN === 0 || (o.repeatPenalty === 1 && o.frequencyPenalty === 0 && o.presencePenalty === 0))
    return { options: o, sample, greedy }
  })
