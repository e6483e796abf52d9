import { Cpu } from "@effect-gpu/core"
import { ChatTemplate, Fixture, Llm } from "@effect-gpu/llm"
import { HttpBody, HttpClient } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, ConfigProvider, Effect, Fiber, Layer, Stream } from "effect"
import * as Server from "../src/Server.js"

const bytes = Fixture.make({
  architecture: "qwen3",
  dtype: "q8_0",
  hidden: 128,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  ffn: 256,
  vocab: 300,
  seed: 9
})
const model = Layer.scoped(Llm.Llm, Llm.fromBytes(bytes, { file: "fixture", size: 1024 })).pipe(
  Layer.provide(Cpu.layer())
)
const serve = Server.app.pipe(Layer.provideMerge(model), Layer.provideMerge(NodeHttpServer.layerTest))

const prompt = [1, 40, 271, 7, 120, 33]
const greedy = { temperature: 0, maxTokens: 12, ignoreEndOfGeneration: true }

/** server-sent events as [name, data] */
const parse = (text: string) =>
  text.split("\n\n").filter((e) => e.length > 0).map((e) => {
    const [name, data] = e.split("\n")
    return [name.replace("event: ", ""), JSON.parse(data.replace("data: ", ""))] as const
  })

const post = (body: unknown, path = "/generate") =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const res = yield* client.post(path, { body: HttpBody.text(JSON.stringify(body), "application/json") })
    return { status: res.status, type: res.headers["content-type"], text: yield* res.text }
  })

/** what the model generates for these options, asked directly */
const direct = (options: typeof greedy, tokens = prompt) =>
  Effect.flatMap(Llm.Llm, (m) => Stream.runCollect(m.generate(tokens, options))).pipe(Effect.map(Chunk.toArray))

describe("llm-server", () => {
  it.scoped("streams the model's tokens as server-sent events, then a done event", () =>
    Effect.gen(function*() {
      const want = yield* direct(greedy)
      const { status, text, type } = yield* post({ tokens: prompt, ...greedy })
      assert.strictEqual(status, 200, text)
      assert.include(type, "text/event-stream")
      const events = parse(text)
      assert.deepStrictEqual(
        events.slice(0, -1).map(([name, data]) => [name, data.token]),
        want.map((g) => ["token", g.token])
      )
      const [name, done] = events[events.length - 1]
      assert.strictEqual(name, "done")
      assert.deepStrictEqual(done.tokens, want.map((g) => g.token))
      assert.strictEqual(done.text, want.map((g) => g.text).join(""))
      const health = yield* Effect.flatMap(HttpClient.HttpClient, (c) => c.get("/health"))
      assert.deepInclude(yield* health.json, { model: "fixture", device: "CPU", architecture: "qwen3" })
    }).pipe(Effect.provide(serve)))

  it.scoped("bad requests get 400 saying what is wrong; a body over the limit 413", () =>
    Effect.gen(function*() {
      for (
        const [body, says] of [
          [{ prompt: "a", tokens: [1] }, "either prompt"],
          [{ prompt: "a", topP: 2 }, "topP"],
          [{ tokens: [1, -2] }, "tokens"],
          [{ prompt: "a", maxTokens: 0 }, "maxTokens"],
          // the model's own checks, before the request waits its turn
          [{ tokens: [1, 300] }, "token 300 is outside the vocabulary of 300"],
          [{ tokens: [] }, "the prompt has no tokens"],
          [{ tokens: Array.from({ length: 1025 }, () => 1) }, "1025 tokens do not fit the context of 1024"]
        ] as const
      ) {
        const { status, text } = yield* post(body)
        assert.strictEqual(status, 400, JSON.stringify(body))
        assert.include(text, says)
      }
      const client = yield* HttpClient.HttpClient
      const malformed = yield* client.post("/generate", { body: HttpBody.text("{\"prompt\":", "application/json") })
      assert.strictEqual(malformed.status, 400)
      const big = yield* post({ prompt: "x".repeat(70 * 1024) })
      assert.strictEqual(big.status, 413)
    }).pipe(Effect.provide(serve)))

  it.scoped("/v1/completions answers OpenAI's completions API: whole, streamed, stopped, refused", () =>
    Effect.gen(function*() {
      const want = yield* direct(greedy)
      const text = want.map((g) => g.text).join("")
      const asked = { prompt, max_tokens: 12, temperature: 0, ignore_eos: true, model: "any", user: "u" }
      // whole: the model's text, the finish reason and the token counts
      const whole = yield* post(asked, "/v1/completions")
      assert.strictEqual(whole.status, 200, whole.text)
      const completion = JSON.parse(whole.text)
      assert.strictEqual(completion.object, "text_completion")
      assert.strictEqual(completion.model, "fixture")
      assert.deepStrictEqual(completion.choices, [{ index: 0, text, logprobs: null, finish_reason: "length" }])
      assert.deepStrictEqual(completion.usage, { prompt_tokens: 6, completion_tokens: 12, total_tokens: 18 })
      // streamed: a chunk a token, the last with the finish reason, then [DONE]
      const streamed = yield* post({ ...asked, stream: true }, "/v1/completions")
      assert.include(streamed.type, "text/event-stream")
      const lines = streamed.text.split("\n\n").filter((l) => l.length > 0)
      assert.isTrue(lines.every((l) => l.startsWith("data: ")), streamed.text)
      assert.strictEqual(lines[lines.length - 1], "data: [DONE]")
      const chunks = lines.slice(0, -1).map((l) => JSON.parse(l.slice("data: ".length)))
      assert.strictEqual(chunks.length, 12 + 1)
      assert.strictEqual(chunks.map((c) => c.choices[0].text).join(""), text)
      assert.deepStrictEqual(chunks.map((c) => c.choices[0].finish_reason), [...Array(12).fill(null), "length"])
      assert.isTrue(chunks.every((c) => c.id === chunks[0].id))
      // a stop string (a string, as OpenAI allows) cuts the text before it: finish "stop"
      const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 2)
      const stopped = JSON.parse((yield* post({ ...asked, stop }, "/v1/completions")).text)
      assert.strictEqual(stopped.choices[0].text, text.slice(0, text.indexOf(stop)))
      assert.strictEqual(stopped.choices[0].finish_reason, "stop")
      // the model list clients ask for first
      const listed = yield* Effect.flatMap(HttpClient.HttpClient, (c) => c.get("/v1/models"))
      assert.deepStrictEqual(
        (yield* listed.json as Effect.Effect<{ data: Array<{ id: string }> }>).data.map((m) => m.id),
        [
          "fixture"
        ]
      )
      // a text prompt; bad requests get OpenAI's error object
      assert.strictEqual((yield* post({ prompt: "hello there", max_tokens: 3 }, "/v1/completions")).status, 200)
      for (
        const [body, says] of [
          [{ max_tokens: 3 }, "prompt"],
          [{ prompt: "a", max_tokens: 0 }, "max_tokens"],
          [{ prompt: "a", n: 2 }, "n"],
          [{ prompt: [1, 300] }, "token 300 is outside the vocabulary of 300"]
        ] as const
      ) {
        const { status, text: answer } = yield* post(body, "/v1/completions")
        assert.strictEqual(status, 400, JSON.stringify(body))
        const error = JSON.parse(answer).error
        assert.strictEqual(error.type, "invalid_request_error")
        assert.include(error.message, says)
      }
    }).pipe(Effect.provide(serve)))

  it.scoped("/v1/chat/completions writes the messages in the model's template and answers chat completions", () =>
    Effect.gen(function*() {
      const m = yield* Llm.Llm
      const messages = [{ role: "system", content: "be brief" }, { role: "user", content: "hello there" }]
      const options = { temperature: 0, maxTokens: 10, ignoreEndOfGeneration: true }
      // the fixture has no template: ChatML, as llama.cpp's server
      const want = yield* Effect.map(
        Stream.runCollect(m.generate(ChatTemplate.apply("chatml", messages), options)),
        Chunk.toArray
      )
      const text = want.map((g) => g.text).join("")
      const asked = { messages, max_tokens: 10, temperature: 0, ignore_eos: true }
      const whole = yield* post(asked, "/v1/chat/completions")
      assert.strictEqual(whole.status, 200, whole.text)
      const completion = JSON.parse(whole.text)
      assert.strictEqual(completion.object, "chat.completion")
      assert.deepStrictEqual(completion.choices, [{
        index: 0,
        message: { role: "assistant", content: text },
        logprobs: null,
        finish_reason: "length"
      }])
      const promptTokens = (yield* m.chatPrompt(messages)).length
      assert.deepStrictEqual(completion.usage, {
        prompt_tokens: promptTokens,
        completion_tokens: 10,
        total_tokens: promptTokens + 10
      })
      const streamed = yield* post({ ...asked, stream: true }, "/v1/chat/completions")
      const lines = streamed.text.split("\n\n").filter((l) => l.length > 0)
      assert.strictEqual(lines[lines.length - 1], "data: [DONE]")
      const chunks = lines.slice(0, -1).map((l) => JSON.parse(l.slice("data: ".length)))
      assert.isTrue(chunks.every((c) => c.object === "chat.completion.chunk"))
      assert.deepStrictEqual(chunks[0].choices[0].delta.role, "assistant")
      assert.strictEqual(chunks.map((c) => c.choices[0].delta.content ?? "").join(""), text)
      assert.deepStrictEqual(chunks[chunks.length - 1].choices[0], {
        index: 0,
        delta: {},
        logprobs: null,
        finish_reason: "length"
      })
      // a model whose template is none of the formats known: 400 saying so, before it waits its turn
      const gemmaLike = Layer.scoped(
        Llm.Llm,
        Llm.fromBytes(Fixture.make({ ...Fixture.demo, chatTemplate: "{{ '<start_of_turn>' + role }}" }), {
          file: "gemma-like",
          size: 64
        })
      ).pipe(Layer.provide(Cpu.layer()))
      const unknown = yield* post(asked, "/v1/chat/completions").pipe(
        Effect.provide(Server.app.pipe(Layer.provideMerge(gemmaLike), Layer.provideMerge(NodeHttpServer.layerTest)))
      )
      assert.strictEqual(unknown.status, 400)
      assert.include(JSON.parse(unknown.text).error.message, "its chat template is none of the formats known here")
      for (
        const [body, says] of [
          [{ messages: [] }, "messages"],
          [{ messages: [{ role: "user" }] }, "content"],
          [{ prompt: "a" }, "messages"]
        ] as const
      ) {
        const { status, text: answer } = yield* post(body, "/v1/chat/completions")
        assert.strictEqual(status, 400, JSON.stringify(body))
        assert.include(JSON.parse(answer).error.message, says)
      }
    }).pipe(Effect.provide(serve)))

  it.scoped("/tokenize and /detokenize: the model's tokenizer, as llama.cpp's server offers it", () =>
    Effect.gen(function*() {
      const { tokenizer } = yield* Llm.Llm
      const text = "hello there, 42 times"
      const plain = JSON.parse((yield* post({ content: text }, "/tokenize")).text)
      assert.deepStrictEqual(plain.tokens, tokenizer.tokenize(text, { addSpecial: false }))
      const withBos = JSON.parse((yield* post({ content: text, add_special: true }, "/tokenize")).text)
      assert.deepStrictEqual(withBos.tokens, tokenizer.tokenize(text, { addSpecial: true }))
      const pieces = JSON.parse((yield* post({ content: text, with_pieces: true }, "/tokenize")).text)
      assert.deepStrictEqual(pieces.tokens.map((p: { id: number }) => p.id), plain.tokens)
      assert.strictEqual(
        pieces.tokens.map((p: { piece: string }) => p.piece).join(""),
        tokenizer.detokenize(plain.tokens)
      )
      const back = JSON.parse((yield* post({ tokens: plain.tokens }, "/detokenize")).text)
      assert.strictEqual(back.content, tokenizer.detokenize(plain.tokens))
      const outside = yield* post({ tokens: [1, 300] }, "/detokenize")
      assert.strictEqual(outside.status, 400)
      assert.include(outside.text, "token 300 is outside the vocabulary of 300")
      assert.strictEqual((yield* post({ content: 5 }, "/tokenize")).status, 400)
    }).pipe(Effect.provide(serve)))

  it.scoped("/v1/embeddings: the model's embeddings pooled as POOLING says, at unit length; none named: 400", () =>
    Effect.gen(function*() {
      const m = yield* Llm.Llm
      // the fixture names no pooling, and no POOLING is set: llama.cpp's server refuses too
      const unnamed = yield* post({ input: "hello there" }, "/v1/embeddings")
      assert.strictEqual(unnamed.status, 400, unnamed.text)
      assert.include(JSON.parse(unnamed.text).error.message, "set POOLING=mean or last")
      const pooled = Server.app.pipe(
        Layer.provideMerge(model),
        Layer.provideMerge(NodeHttpServer.layerTest),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["POOLING", "mean"]]))))
      )
      const answered = yield* post({ input: ["hello there", [1, 40, 271]], model: "any" }, "/v1/embeddings").pipe(
        Effect.provide(pooled)
      )
      assert.strictEqual(answered.status, 200, answered.text)
      const list = JSON.parse(answered.text)
      assert.strictEqual(list.object, "list")
      assert.deepStrictEqual(list.data.map((d: { index: number }) => d.index), [0, 1])
      const want = yield* Effect.forEach(
        ["hello there", [1, 40, 271]] as const,
        (input) => m.embed(input, { pooling: "mean", normalize: true })
      )
      list.data.forEach((d: { embedding: Array<number> }, i: number) => {
        assert.strictEqual(d.embedding.length, 128)
        d.embedding.forEach((v, k) => assert.closeTo(v, want[i][k], 1e-6))
      })
      const prompt = (yield* m.prompt("hello there")).length + 3
      assert.deepStrictEqual(list.usage, { prompt_tokens: prompt, total_tokens: prompt })
      const bad = yield* post({ input: [] }, "/v1/embeddings").pipe(Effect.provide(pooled))
      assert.strictEqual(bad.status, 400)
    }).pipe(Effect.provide(serve)))

  it.live(
    "a client that disconnects stops its generation; requests at once are served in turn, each right",
    () =>
      Effect.gen(function*() {
        const m = yield* Llm.Llm
        const client = yield* HttpClient.HttpClient
        // read the first event, then go away
        const fiber = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
          const res = yield* client.post("/generate", {
            body: HttpBody.text(JSON.stringify({ tokens: prompt, ...greedy, maxTokens: 900 }), "application/json")
          })
          yield* Stream.runDrain(res.stream)
        })))
        while ((yield* m.context.position) <= prompt.length + 2) yield* Effect.sleep("5 millis")
        yield* Fiber.interrupt(fiber)
        yield* Effect.sleep("300 millis")
        const stopped = yield* m.context.position
        yield* Effect.sleep("300 millis")
        assert.strictEqual(yield* m.context.position, stopped, "the generation went on after the client left")
        assert.isBelow(stopped, prompt.length + 900)
        const other = [1, 9, 8, 7]
        const [a, b] = yield* Effect.all([post({ tokens: prompt, ...greedy }), post({ tokens: other, ...greedy })], {
          concurrency: "unbounded"
        })
        const tokensOf = (text: string) => parse(text).filter(([n]) => n === "token").map(([, d]) => d.token)
        assert.deepStrictEqual(tokensOf(a.text), (yield* direct(greedy)).map((g) => g.token))
        assert.deepStrictEqual(tokensOf(b.text), (yield* direct(greedy, other)).map((g) => g.token))
      }).pipe(Effect.scoped, Effect.provide(serve)),
    60_000
  )
})
