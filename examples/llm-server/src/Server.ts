/**
 * Tokens as server-sent events: POST /generate with {"prompt": "..."} or {"tokens": [ids]} and sampling
 * options answers `text/event-stream`, one `token` event per token ({"token", "text"}) and a `done` event
 * ({"tokens", "text"}); GET /health names the model and its device. A body that is not valid, or a prompt
 * the model refuses (no tokens, ids outside its vocabulary, longer than its context), gets 400 saying what
 * and where, before it waits its turn; a body over BODY_LIMIT bytes 413. Generations run one at a time in
 * the order they came (the model's queue); a client that disconnects stops its generation at the next token.
 * POST /tokenize and /detokenize turn text into token ids and back, as llama.cpp's server does.
 * POST /v1/completions and /v1/chat/completions answer OpenAI's API as llama.cpp's server does
 * (Completions.ts), and POST /v1/embeddings its embeddings (Embeddings.ts).
 */
import type { ModelError } from "@effect-gpu/llm"
import { Llm } from "@effect-gpu/llm"
import type { HttpServerError } from "@effect/platform"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Config, Effect, Option, ParseResult, Schema, Stream } from "effect"
import * as Completions from "./Completions.js"
import * as Embeddings from "./Embeddings.js"

const Probability = Schema.Number.pipe(Schema.between(0, 1))

export const GenerateRequest = Schema.Struct({
  prompt: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(16384)), { exact: true }),
  tokens: Schema.optionalWith(Schema.Array(Schema.Int.pipe(Schema.nonNegative())).pipe(Schema.maxItems(4096)), {
    exact: true
  }),
  maxTokens: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 4096)), { exact: true }),
  temperature: Schema.optionalWith(Schema.Number.pipe(Schema.between(0, 10)), { exact: true }),
  topK: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { exact: true }),
  topP: Schema.optionalWith(Probability.pipe(Schema.greaterThan(0)), { exact: true }),
  minP: Schema.optionalWith(Probability, { exact: true }),
  repeatPenalty: Schema.optionalWith(Schema.Number.pipe(Schema.positive()), { exact: true }),
  seed: Schema.optionalWith(Schema.Int, { exact: true }),
  stop: Schema.optionalWith(Schema.Array(Schema.String).pipe(Schema.maxItems(8)), { exact: true }),
  ignoreEndOfGeneration: Schema.optionalWith(Schema.Boolean, { exact: true })
}).pipe(
  Schema.filter((r) =>
    (r.prompt === undefined) !== (r.tokens === undefined) || "send either prompt (text) or tokens (ids)"
  )
)

/** POST /tokenize, as llama.cpp's server takes it: special tokens parsed, BOS not added unless asked */
export const TokenizeRequest = Schema.Struct({
  content: Schema.String.pipe(Schema.maxLength(16384)),
  add_special: Schema.optionalWith(Schema.Boolean, { exact: true, default: () => false }),
  parse_special: Schema.optionalWith(Schema.Boolean, { exact: true, default: () => true }),
  with_pieces: Schema.optionalWith(Schema.Boolean, { exact: true, default: () => false })
})

export const DetokenizeRequest = Schema.Struct({
  tokens: Schema.Array(Schema.Int.pipe(Schema.nonNegative())).pipe(Schema.maxItems(16384))
})

/** the largest body accepted, in bytes (default 64 KiB) */
export const bodyLimit = Config.integer("BODY_LIMIT").pipe(Config.withDefault(64 * 1024))

const error = (status: number, message: string) => HttpServerResponse.unsafeJson({ error: message }, { status })

class TooLarge {
  readonly _tag = "TooLarge"
  constructor(readonly limit: number) {}
}

/** the request's body decoded with `schema` (TooLarge past the body limit) */
const body = <A, I>(schema: Schema.Schema<A, I>) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const limit = yield* bodyLimit
    if (Number(request.headers["content-length"] ?? "0") > limit) return yield* Effect.fail(new TooLarge(limit))
    const text = yield* request.text.pipe(
      HttpServerRequest.withMaxBodySize(Option.some(limit)),
      Effect.mapError((e): TooLarge | HttpServerError.RequestError =>
        String(e.cause).includes("maxBytes") ? new TooLarge(limit) : e
      )
    )
    return yield* Schema.decodeUnknown(Schema.parseJson(schema))(text)
  })

/** schema failures as `path: message` lines */
const describe = (e: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(e).map((i) =>
    `${i.path.length > 0 ? i.path.join(".") : "body"}: ${i.message}`
  ).join("; ")

const encoder = new TextEncoder()
const event = (name: string, data: unknown) => encoder.encode(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`)
const eventStream = { contentType: "text/event-stream", headers: { "cache-control": "no-cache" } }

/** a failed request's answer, `answer` giving its body from a status and a message */
const refused = (answer: (status: number, message: string) => HttpServerResponse.HttpServerResponse) =>
  Effect.catchTags({
    TooLarge: (e: TooLarge) => Effect.succeed(answer(413, `the body is over ${e.limit} bytes`)),
    ParseError: (e: ParseResult.ParseError) => Effect.succeed(answer(400, describe(e))),
    ModelError: (e: ModelError.ModelError) => Effect.succeed(answer(400, e.problem)),
    RequestError: (e: HttpServerError.RequestError) => Effect.succeed(answer(400, `unreadable body: ${e.message}`))
  })

/**
 * an OpenAI route: the body decoded with `schema`, `start` checking it against the model (a refused
 * prompt fails with ModelError) and giving its completion, answered whole or streamed as `data:` chunks
 * ending in [DONE]; failures as OpenAI's error object
 */
const openAi = <A extends { readonly stream: boolean }, I, E>(
  schema: Schema.Schema<A, I>,
  start: (
    model: Llm.Model,
    request: A
  ) => Effect.Effect<ReturnType<typeof Completions.complete>, ModelError.ModelError | E>
) =>
  Effect.gen(function*() {
    const request = yield* body(schema)
    const model = yield* Llm.Llm
    const { chunks, whole } = yield* start(model, request)
    if (!request.stream) {
      return yield* whole.pipe(
        Effect.map((completion) => HttpServerResponse.unsafeJson(completion)),
        Effect.catchAll((e) =>
          Effect.succeed(HttpServerResponse.unsafeJson(Completions.errorBody(e.message), { status: 500 }))
        )
      )
    }
    const data = (value: unknown) => encoder.encode(`data: ${JSON.stringify(value)}\n\n`)
    const events = chunks.pipe(
      Stream.map(data),
      Stream.concat(Stream.succeed(encoder.encode("data: [DONE]\n\n"))),
      Stream.catchAll((e) => Stream.succeed(data(Completions.errorBody(e.message))))
    )
    return HttpServerResponse.stream(events, eventStream)
  }).pipe(refused((status, message) => HttpServerResponse.unsafeJson(Completions.errorBody(message), { status })))

export const router = HttpRouter.empty.pipe(
  HttpRouter.get(
    "/health",
    Effect.map(Llm.Llm, (m) =>
      HttpServerResponse.unsafeJson({
        model: m.file,
        device: m.device.name,
        architecture: m.hyperparameters.architecture
      }))
  ),
  HttpRouter.post(
    "/generate",
    Effect.gen(function*() {
      const request = yield* body(GenerateRequest)
      const model = yield* Llm.Llm
      const { prompt, tokens, ...options } = request
      // checked here, so that a prompt the model refuses is a 400, not an error event after a 200
      const ids = yield* model.prompt(tokens ?? prompt ?? "")
      const generated: Array<number> = []
      let text = ""
      const events = model.generate(ids, options).pipe(
        Stream.map((g) => {
          generated.push(g.token)
          text += g.text
          return event("token", g)
        }),
        Stream.concat(Stream.suspend(() => Stream.succeed(event("done", { tokens: generated, text })))),
        Stream.catchAll((e) => Stream.succeed(event("error", { error: e.message })))
      )
      return HttpServerResponse.stream(events, eventStream)
    }).pipe(refused(error))
  ),
  HttpRouter.post(
    "/tokenize",
    Effect.gen(function*() {
      const request = yield* body(TokenizeRequest)
      const { tokenizer } = yield* Llm.Llm
      const tokens = tokenizer.tokenize(request.content, {
        addSpecial: request.add_special,
        parseSpecial: request.parse_special
      })
      return HttpServerResponse.unsafeJson({
        tokens: request.with_pieces ? tokens.map((id) => ({ id, piece: tokenizer.detokenize([id], true) })) : tokens
      })
    }).pipe(refused(error))
  ),
  HttpRouter.post(
    "/detokenize",
    Effect.gen(function*() {
      const request = yield* body(DetokenizeRequest)
      const { tokenizer } = yield* Llm.Llm
      const outside = request.tokens.find((t) => t >= tokenizer.size)
      if (outside !== undefined) {
        return error(400, `token ${outside} is outside the vocabulary of ${tokenizer.size}`)
      }
      return HttpServerResponse.unsafeJson({ content: tokenizer.detokenize(request.tokens) })
    }).pipe(refused(error))
  ),
  HttpRouter.post(
    "/v1/embeddings",
    Effect.gen(function*() {
      const request = yield* body(Embeddings.EmbeddingRequest)
      const model = yield* Llm.Llm
      return HttpServerResponse.unsafeJson(yield* Embeddings.embed(model, request))
    }).pipe(
      refused((status, message) => HttpServerResponse.unsafeJson(Completions.errorBody(message), { status })),
      // a device's failure, or a POOLING that cannot be read
      Effect.catchAll((e) =>
        Effect.succeed(HttpServerResponse.unsafeJson(Completions.errorBody(String(e)), { status: 500 }))
      )
    )
  ),
  HttpRouter.get(
    "/v1/models",
    Effect.map(Llm.Llm, (m) => HttpServerResponse.unsafeJson(Completions.models(m)))
  ),
  HttpRouter.post(
    "/v1/completions",
    openAi(
      Completions.CompletionRequest,
      (model, request) =>
        Effect.map(model.prompt(request.prompt), (ids) => Completions.complete(model, ids, request, "text"))
    )
  ),
  HttpRouter.post(
    "/v1/chat/completions",
    openAi(
      Completions.ChatCompletionRequest,
      (model, request) =>
        Effect.map(model.chatPrompt(request.messages), (ids) => Completions.complete(model, ids, request, "chat"))
    )
  )
)

export const app = HttpServer.serve(router).pipe(HttpServer.withLogAddress)
