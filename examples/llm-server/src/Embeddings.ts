/**
 * OpenAI's embeddings API, as llama.cpp's server answers it: POST /v1/embeddings with {"input": a text,
 * texts, token ids or lists of them} answers {"object": "list", "data": [{"object": "embedding", "index",
 * "embedding"}], "model", "usage"}, each embedding pooled as the model names it (or as POOLING says, as
 * llama.cpp's `--pooling`) and scaled to unit length. A model that names no pooling, with no POOLING, gets
 * 400 saying so, as llama.cpp's server answers.
 */
import type { Llm } from "@effect-gpu/llm"
import { ModelError } from "@effect-gpu/llm/ModelError"
import { Config, Effect, Schema } from "effect"

const Ids = Schema.Array(Schema.Int.pipe(Schema.nonNegative())).pipe(Schema.minItems(1), Schema.maxItems(4096))
const Text = Schema.String.pipe(Schema.maxLength(16384))

export const EmbeddingRequest = Schema.Struct({
  input: Schema.Union(Text, Ids, Schema.Array(Schema.Union(Text, Ids)).pipe(Schema.minItems(1), Schema.maxItems(64)))
})

/** how embeddings are pooled where the model names no way (llama.cpp's `--pooling`): mean or last */
export const pooling = Config.option(Config.literal("mean", "last")("POOLING"))

/** the inputs of a request: one text or id list, or several */
const inputsOf = (input: typeof EmbeddingRequest.Type["input"]): ReadonlyArray<string | ReadonlyArray<number>> =>
  typeof input === "string" || (input.length > 0 && typeof input[0] === "number")
    ? [input as string | ReadonlyArray<number>]
    : input as ReadonlyArray<string | ReadonlyArray<number>>

/** the embeddings of a request's inputs, one after another */
export const embed = (model: Llm.Model, request: typeof EmbeddingRequest.Type) =>
  Effect.gen(function*() {
    const asked = yield* pooling
    const way = asked._tag === "Some" ? asked.value : model.hyperparameters.pooling
    if (way !== "mean" && way !== "last") {
      return yield* new ModelError({
        file: model.file,
        problem: `${
          way === "none"
            ? "the model names no pooling for its embeddings"
            : "the model's pooling_type is neither mean nor last"
        }: set POOLING=mean or last`
      })
    }
    const inputs = inputsOf(request.input)
    let tokens = 0
    const data = yield* Effect.forEach(inputs, (input, index) =>
      Effect.gen(function*() {
        // (the tokens, made once: embed takes ids as they are)
        const ids = yield* model.prompt(input)
        tokens += ids.length
        const embedding = yield* model.embed(ids, { pooling: way, normalize: true })
        return { object: "embedding", index, embedding: Array.from(embedding) }
      }))
    return { object: "list", data, model: model.file, usage: { prompt_tokens: tokens, total_tokens: tokens } }
  })
