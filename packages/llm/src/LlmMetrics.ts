/**
 * Generation's metrics (effect `Metric`), each tagged with its model (`model`: the name `Llm.load` or
 * `fromBytes` gave it): prompt tokens computed and reused from the cache, tokens generated, the wait for
 * the model, the time to the first token and between tokens. Read them with
 * `Metric.value(Metric.tagged(LlmMetrics.generatedTokens, "model", name))`, or export them with any metrics
 * layer (e.g. @effect/opentelemetry's), as the backends' `Metrics`.
 *
 * @since 0.1.0
 */
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricLabel from "effect/MetricLabel"

/**
 * Prompt tokens a generation computed (those whose keys and values the cache already held are not counted).
 *
 * @since 0.1.0
 * @category metrics
 */
export const promptTokens: Metric.Metric.Counter<number> = Metric.counter("effect_gpu_llm_prompt_tokens", {
  description: "prompt tokens computed by generations",
  incremental: true
})

/**
 * Prompt tokens a generation took from the cache the one before left (a shared beginning).
 *
 * @since 0.1.0
 * @category metrics
 */
export const reusedTokens: Metric.Metric.Counter<number> = Metric.counter("effect_gpu_llm_reused_tokens", {
  description: "prompt tokens taken from the cache",
  incremental: true
})

/**
 * Tokens generated (an end-of-generation token included).
 *
 * @since 0.1.0
 * @category metrics
 */
export const generatedTokens: Metric.Metric.Counter<number> = Metric.counter("effect_gpu_llm_generated_tokens", {
  description: "tokens generated",
  incremental: true
})

// 10 us to ~80 s, as the backends' compute latency
const boundaries = MetricBoundaries.exponential({ start: 0.01, factor: 2, count: 24 })

/**
 * Milliseconds a generation waited for the model (the generations before it in the queue).
 *
 * @since 0.1.0
 * @category metrics
 */
export const queueWait: Metric.Metric.Histogram<number> = Metric.histogram(
  "effect_gpu_llm_queue_wait_ms",
  boundaries,
  "milliseconds a generation waited for the model"
)

/**
 * Milliseconds from the model being a generation's to its first token: the prompt and one sample.
 *
 * @since 0.1.0
 * @category metrics
 */
export const firstToken: Metric.Metric.Histogram<number> = Metric.histogram(
  "effect_gpu_llm_first_token_ms",
  boundaries,
  "milliseconds from the prompt's start to the first token"
)

/**
 * Milliseconds between a generation's tokens, as the stream's consumer pulled them.
 *
 * @since 0.1.0
 * @category metrics
 */
export const tokenLatency: Metric.Metric.Histogram<number> = Metric.histogram(
  "effect_gpu_llm_token_ms",
  boundaries,
  "milliseconds between generated tokens"
)

/** the tag of a model's series */
const modelTags = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()
const tagsOf = (model: string) => {
  let tags = modelTags.get(model)
  if (tags === undefined) modelTags.set(model, tags = [MetricLabel.make("model", model)])
  return tags
}

/** @internal: a generation has the model: its wait, and the prompt tokens computed and reused */
export const recordStart = (model: string, waitMs: number, computed: number, reused: number): void => {
  const tags = tagsOf(model)
  queueWait.unsafeUpdate(waitMs, tags)
  promptTokens.unsafeUpdate(computed, tags)
  reusedTokens.unsafeUpdate(reused, tags)
}

/**
 * @internal: a token generated, `ms` after the one before (`first`: after the model became the generation's);
 * synchronous, as it runs on the per-token path
 */
export const recordToken = (model: string, ms: number, first: boolean): void => {
  const tags = tagsOf(model)
  generatedTokens.unsafeUpdate(1, tags)
  ;(first ? firstToken : tokenLatency).unsafeUpdate(ms, tags)
}
