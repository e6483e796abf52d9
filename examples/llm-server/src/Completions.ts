/**
 * OpenAI's completions API, as llama.cpp's server answers it, so that existing clients can talk to the
 * model: POST /v1/completions with {"prompt": text or token ids, "max_tokens", "temperature", "top_p",
 * "stop", "stream", ...} answers one `text_completion` object, or with "stream": true server-sent `data:`
 * chunks ending in `data: [DONE]`; POST /v1/chat/completions takes "messages" instead of "prompt",
 * written in the model's chat template (ChatTemplate), and answers `chat.completion` objects. llama.cpp's
 * extensions top_k, min_p, repeat_penalty and ignore_eos are taken too; other fields (model, user, ...)
 * are ignored, as there. A bad body or a prompt the model refuses gets 400 with OpenAI's error object.
 * GET /v1/models lists the one model.
 */
import type { Llm } from "@effect-gpu/llm"
import { Effect, Schema, Stream } from "effect"

const Probability = Schema.Number.pipe(Schema.between(0, 1))

/** the sampling fields both requests take */
const sampling = {
  max_tokens: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 4096)), { exact: true, default: () => 16 }),
  temperature: Schema.optionalWith(Schema.Number.pipe(Schema.between(0, 2)), { exact: true }),
  top_p: Schema.optionalWith(Probability.pipe(Schema.greaterThan(0)), { exact: true }),
  top_k: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { exact: true }),
  min_p: Schema.optionalWith(Probability, { exact: true }),
  repeat_penalty: Schema.optionalWith(Schema.Number.pipe(Schema.positive()), { exact: true }),
  frequency_penalty: Schema.optionalWith(Schema.Number.pipe(Schema.between(-2, 2)), { exact: true }),
  presence_penalty: Schema.optionalWith(Schema.Number.pipe(Schema.between(-2, 2)), { exact: true }),
  seed: Schema.optionalWith(Schema.Int, { exact: true }),
  stop: Schema.optionalWith(
    Schema.Union(Schema.String, Schema.Array(Schema.String).pipe(Schema.maxItems(4))),
    { exact: true }
  ),
  stream: Schema.optionalWith(Schema.Boolean, { exact: true, default: () => false }),
  ignore_eos: Schema.optionalWith(Schema.Boolean, { exact: true }),
  // (one choice a request: the model runs one generation at a time)
  n: Schema.optionalWith(Schema.Literal(1), { exact: true })
}

export const CompletionRequest = Schema.Struct({
  prompt: Schema.Union(
    Schema.String.pipe(Schema.maxLength(16384)),
    Schema.Array(Schema.Int.pipe(Schema.nonNegative())).pipe(Schema.maxItems(4096))
  ),
  ...sampling
})

export const ChatCompletionRequest = Schema.Struct({
  messages: Schema.Array(
    Schema.Struct({
      role: Schema.String.pipe(Schema.maxLength(64)),
      content: Schema.String.pipe(Schema.maxLength(16384))
    })
  ).pipe(Schema.minItems(1), Schema.maxItems(256)),
  ...sampling
})

/** the sampling fields of either request */
export type Sampling = Omit<typeof CompletionRequest.Type, "prompt">

export type CompletionRequest = typeof CompletionRequest.Type

/** the request's sampling options as Llm.generate takes them */
export const generateOptions = (r: Sampling): Llm.GenerateOptions => ({
  maxTokens: r.max_tokens,
  ...(r.temperature !== undefined ? { temperature: r.temperature } : {}),
  ...(r.top_p !== undefined ? { topP: r.top_p } : {}),
  ...(r.top_k !== undefined ? { topK: r.top_k } : {}),
  ...(r.min_p !== undefined ? { minP: r.min_p } : {}),
  ...(r.repeat_penalty !== undefined ? { repeatPenalty: r.repeat_penalty } : {}),
  ...(r.frequency_penalty !== undefined ? { frequencyPenalty: r.frequency_penalty } : {}),
  ...(r.presence_penalty !== undefined ? { presencePenalty: r.presence_penalty } : {}),
  ...(r.seed !== undefined ? { seed: r.seed } : {}),
  ...(r.stop !== undefined ? { stop: typeof r.stop === "string" ? [r.stop] : r.stop } : {}),
  ...(r.ignore_eos !== undefined ? { ignoreEndOfGeneration: r.ignore_eos } : {})
})

/** OpenAI's model list (GET /v1/models, which clients ask first): the one model served */
export const models = (model: Llm.Model) => ({
  object: "list",
  data: [{ id: model.file, object: "model", created: 0, owned_by: "effect-gpu" }]
})

/** OpenAI's error object */
export const errorBody = (message: string) => ({ error: { message, type: "invalid_request_error" } })

let served = 0

/**
 * The completion of a checked request's tokens, as text completions (`kind` "text") or chat completions
 * ("chat"): one object whole, or the chunks of a stream, a token's text each, the last with the finish
 * reason ("length" where max_tokens ran out, else "stop": an end-of-generation token or a stop string)
 */
export const complete = (
  model: Llm.Model,
  ids: ReadonlyArray<number>,
  request: Sampling,
  kind: "text" | "chat"
) => {
  const n = ++served
  const head = (object: string) => ({
    id: `${kind === "text" ? "cmpl" : "chatcmpl"}-${n}`,
    object,
    created: Math.floor(Date.now() / 1000),
    model: model.file
  })
  let count = 0
  const finish = () => (count >= request.max_tokens ? "length" : "stop")
  const usage = () => ({ prompt_tokens: ids.length, completion_tokens: count, total_tokens: ids.length + count })
  const tokens = model.generate(ids, generateOptions(request)).pipe(Stream.tap(() => Effect.sync(() => count++)))
  const text = (content: string, finish_reason: string | null) => ({
    ...head("text_completion"),
    choices: [{ index: 0, text: content, logprobs: null, finish_reason }]
  })
  // a chat stream's first chunk names the role, as OpenAI's do
  const delta = (content: string | undefined, finish_reason: string | null) => ({
    ...head("chat.completion.chunk"),
    choices: [{
      index: 0,
      delta: content === undefined ? {} : count === 1 ? { role: "assistant", content } : { content },
      logprobs: null,
      finish_reason
    }]
  })
  const chunk = kind === "text" ? (t: string) => text(t, null) : (t: string) => delta(t, null)
  const last = () => ({ ...(kind === "text" ? text("", finish()) : delta(undefined, finish())), usage: usage() })
  return {
    chunks: Stream.concat(Stream.map(tokens, (g) => chunk(g.text)), Stream.suspend(() => Stream.succeed(last()))),
    whole: Effect.map(
      Stream.runFold(tokens, "", (all, g) => all + g.text),
      (all) =>
        kind === "text"
          ? { ...text(all, finish()), usage: usage() }
          : {
            ...head("chat.completion"),
            choices: [{
              index: 0,
              message: { role: "assistant", content: all },
              logprobs: null,
              finish_reason: finish()
            }],
            usage: usage()
          }
    )
  }
}
