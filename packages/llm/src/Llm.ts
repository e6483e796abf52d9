/**
 * A GGUF model loaded on a device, as a scoped service: its tokenizer, a context with a KV cache, and
 * `generate`, a Stream of tokens with their text. Generations run one at a time, in the order they were
 * asked for; one interrupted stops at the next token and leaves the context usable, and a prompt that
 * starts like the last one reuses the cached positions.
 *
 * @since 0.1.0
 */
import type * as Device from "@effect-gpu/core/Device"
import type {
  AllocationError,
  BackendError,
  DeviceLost,
  NoAdapter,
  OutOfBounds,
  Released,
  ShapeError
} from "@effect-gpu/core/GpuError"
import * as Registry from "@effect-gpu/core/Registry"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as EffectContext from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as ChatTemplate from "./ChatTemplate.js"
import * as Context from "./Context.js"
import * as Gguf from "./Gguf.js"
import * as Hyperparameters from "./Hyperparameters.js"
import * as LlmMetrics from "./LlmMetrics.js"
import { ModelError } from "./ModelError.js"
import * as ModelFile from "./ModelFile.js"
import * as Sampler from "./Sampler.js"
import * as Tokenizer from "./Tokenizer.js"
import * as Weights from "./Weights.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface LoadOptions extends Context.Options {
  /** where the model runs (default: the registry's best device) */
  readonly device?: Device.Device
  /** called after each tensor is copied */
  readonly onProgress?: (progress: Weights.Progress) => Effect.Effect<void>
}

/**
 * How a text prompt becomes tokens.
 *
 * @since 0.1.0
 * @category models
 */
export interface PromptOptions {
  /** for a text prompt: add BOS as the model asks (default true) */
  readonly addSpecial?: boolean
  /** for a text prompt: read special tokens' text as those tokens (default true) */
  readonly parseSpecial?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface GenerateOptions extends Sampler.Options, PromptOptions {
  /** tokens to generate at most (default 128) */
  readonly maxTokens?: number
  /** texts that end the generation; the text stops before them */
  readonly stop?: ReadonlyArray<string>
  /** go on past end-of-generation tokens (benchmarks) */
  readonly ignoreEndOfGeneration?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ChatOptions extends GenerateOptions {
  /** the format to write the messages in (default: the model's chat template's) */
  readonly template?: ChatTemplate.Name
}

/**
 * @since 0.1.0
 * @category models
 */
export interface EmbedOptions extends PromptOptions {
  /** how the tokens' embeddings become one (default: as the model names it, else `none`) */
  readonly pooling?: "none" | "mean" | "last"
  /** scale each embedding to unit length (default false) */
  readonly normalize?: boolean
}

/**
 * A generated token and the text it completes (empty while a character or a possible stop string is
 * incomplete; held text comes out with a later token or the last one).
 *
 * @since 0.1.0
 * @category models
 */
export interface Generated {
  readonly token: number
  readonly text: string
}

/**
 * @since 0.1.0
 * @category errors
 */
export type LoadError = ModelError | AllocationError | DeviceLost | Released | OutOfBounds | BackendError | ShapeError

/**
 * @since 0.1.0
 * @category errors
 */
export type GenerateError = Context.EvaluateError | Sampler.InvalidSampling

/**
 * @since 0.1.0
 * @category models
 */
export interface Model {
  /** names the model: its path, or what the caller said */
  readonly file: string
  readonly device: Device.Device
  readonly hyperparameters: Hyperparameters.Hyperparameters
  readonly tokenizer: Tokenizer.Tokenizer
  readonly context: Context.Context
  /** the model's weights in bytes */
  readonly bytes: number
  /**
   * The tokens `generate` runs for `prompt` (text, or token ids used as they are), checked without waiting
   * for the model: fails with ModelError where there are none, one is outside the vocabulary, or they do
   * not fit the context. A server can answer a bad prompt before its stream starts.
   */
  readonly prompt: (
    prompt: string | ReadonlyArray<number>,
    options?: PromptOptions
  ) => Effect.Effect<ReadonlyArray<number>, ModelError>
  /**
   * Tokens after `prompt` (text, or token ids used as they are). Pulling the stream computes; stopping
   * it (interruption, `Stream.take`) stops at the next token. A prompt that `prompt` refuses fails the
   * stream at once, before it waits for the generation or evaluation in progress.
   */
  readonly generate: (
    prompt: string | ReadonlyArray<number>,
    options?: GenerateOptions
  ) => Stream.Stream<Generated, GenerateError>
  /**
   * The format of the model's chat template (ChatTemplate: ChatML where the file has none); undefined
   * where its template is none of the formats known here (`chat` then needs `template`).
   */
  readonly chatTemplate: ChatTemplate.Name | undefined
  /**
   * The tokens `chat` runs for `messages`: written as the model's chat template has them (or as `template`
   * names), ending with the opening of the assistant's turn, then checked as `prompt` checks. Fails with
   * ModelError where the model's template is unknown and no `template` is given.
   */
  readonly chatPrompt: (
    messages: ReadonlyArray<ChatTemplate.Message>,
    options?: PromptOptions & { readonly template?: ChatTemplate.Name }
  ) => Effect.Effect<ReadonlyArray<number>, ModelError>
  /** `generate` over chat messages (`chatPrompt`'s tokens): the assistant's reply */
  readonly chat: (
    messages: ReadonlyArray<ChatTemplate.Message>,
    options?: ChatOptions
  ) => Stream.Stream<Generated, GenerateError>
  /**
   * The embedding of `input` (text, or token ids used as they are), from an empty context: its tokens'
   * hidden states after the output norm, as llama.cpp's embeddings, pooled as `pooling` says (default: as
   * the model names it, `none` where it names none): `mean` or `last` give [hidden], `none` every token's
   * [hidden × tokens]; `normalize` scales each to unit length (as llama.cpp's server does). Fails with
   * ModelError for a prompt `prompt` refuses, or a pooling the model names that is not one of these.
   */
  readonly embed: (
    input: string | ReadonlyArray<number>,
    options?: EmbedOptions
  ) => Effect.Effect<Float32Array, Context.EvaluateError>
  /**
   * The logits of every position of `tokens` from an empty context ([vocab × tokens], token-major); tokens
   * that `prompt` refuses fail at once, as in `generate`.
   */
  readonly evaluate: (tokens: ReadonlyArray<number>) => Effect.Effect<Float32Array, Context.EvaluateError>
}

/**
 * The model as a service.
 *
 * @since 0.1.0
 * @category tags
 */
export class Llm extends EffectContext.Tag("@effect-gpu/llm/Llm")<Llm, Model>() {}

/** the longest suffix of `text` that begins one of `stops` */
const heldBack = (text: string, stops: ReadonlyArray<string>) => {
  let hold = 0
  for (const stop of stops) {
    for (let k = Math.min(stop.length - 1, text.length); k > hold; k--) {
      if (stop.startsWith(text.slice(text.length - k))) {
        hold = k
        break
      }
    }
  }
  return hold
}

/**
 * A model from a parsed GGUF file and its bytes, on `options.device` or the registry's best device.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  file: string,
  gguf: Gguf.GgufFile,
  source: Uint8Array | Weights.Source,
  options: LoadOptions = {}
): Effect.Effect<Model, LoadError | NoAdapter, Scope.Scope | Registry.Registry> =>
  Effect.gen(function*() {
    const h = yield* Hyperparameters.fromGguf(gguf, file)
    const tokenizer = yield* Tokenizer.fromGguf(gguf, file)
    // (a template of another format does not stop the load: `chat` says so where it is asked for)
    const template = yield* Effect.either(ChatTemplate.fromGguf(gguf, file))
    const device = options.device ?? (yield* Registry.bestDevice)
    const weights = yield* Weights.load(device, gguf, source, {
      file,
      ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {})
    })
    const context = yield* Context.make(device, h, weights, { ...options, file })
    const lock = yield* Effect.makeSemaphore(1)
    // the tokens whose keys and values the context holds
    let cached: Array<number> = []

    const promptTokens: Model["prompt"] = (prompt, promptOptions = {}) =>
      Effect.suspend(() => {
        const tokens = typeof prompt === "string"
          ? tokenizer.tokenize(prompt, {
            addSpecial: promptOptions.addSpecial ?? true,
            parseSpecial: promptOptions.parseSpecial ?? true
          })
          : [...prompt]
        return tokens.length === 0
          ? new ModelError({ file, problem: "the prompt has no tokens" })
          : Effect.as(context.check(tokens, 0), tokens)
      })

    const generate: Model["generate"] = (prompt, generateOptions = {}) =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const sampler = yield* Sampler.make(generateOptions)
        const maxTokens = generateOptions.maxTokens ?? 128
        if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
          return yield* new Sampler.InvalidSampling({
            option: "maxTokens",
            value: maxTokens,
            reason: "must be 1 or more"
          })
        }
        const stops = (generateOptions.stop ?? []).filter((s) => s.length > 0)
        const ends = generateOptions.ignoreEndOfGeneration === true ? new Set<number>() : tokenizer.endOfGeneration
        const tokens = yield* promptTokens(prompt, generateOptions)
        const asked = performance.now()
        yield* Effect.acquireRelease(lock.take(1), () => lock.release(1))
        // keep the positions the last generation left that this prompt starts with
        let keep = 0
        while (keep < cached.length && keep < tokens.length - 1 && cached[keep] === tokens[keep]) keep++
        let previous = performance.now()
        LlmMetrics.recordStart(file, previous - asked, tokens.length - keep, keep)
        yield* context.truncate(keep)
        cached = cached.slice(0, keep)
        const history = [...tokens]
        // a greedy sampler's token is the logits' argmax: the context takes it on the device, reads it alone
        // (4 bytes a token, not the vocabulary's logits) and runs a step ahead; the tokens it kept are known
        // once its scope closes
        if (sampler.greedy) {
          yield* Effect.addFinalizer(() =>
            Effect.map(context.position, (p) => {
              cached = history.slice(0, p)
            })
          )
        }
        const greedy = sampler.greedy ? yield* context.greedy(tokens.slice(keep)) : undefined
        let logits = greedy !== undefined ? undefined : yield* context.evaluate(tokens.slice(keep))
        if (greedy === undefined) cached.push(...tokens.slice(keep))
        const decoder = Tokenizer.decoder(tokenizer)
        let pending = ""
        let last: number | undefined
        let done = false

        const step = Effect.gen(function*() {
          if (done) return yield* Effect.fail(Option.none())
          // sampling: the previous token is computed when the next is asked for, so a stream stopped after a
          // token leaves nothing half done (greedy: the context's step ahead is waited for as its scope closes)
          if (last !== undefined && greedy === undefined) {
            logits = yield* context.evaluate([last]).pipe(Effect.mapError(Option.some))
            cached.push(last)
          }
          const token = greedy !== undefined
            ? yield* greedy.take.pipe(Effect.mapError(Option.some))
            : sampler.sample(logits!, history)
          const now = performance.now()
          LlmMetrics.recordToken(file, now - previous, last === undefined)
          previous = now
          history.push(token)
          last = token
          if (ends.has(token)) {
            done = true
            const text = pending + decoder.flush()
            return text.length > 0 ? { token, text } : yield* Effect.fail(Option.none())
          }
          pending += decoder.push(token)
          const found = stops.map((s) => pending.indexOf(s)).filter((i) => i >= 0)
          if (found.length > 0) {
            done = true
            return { token, text: pending.slice(0, Math.min(...found)) }
          }
          if (history.length - tokens.length >= maxTokens) {
            done = true
            return { token, text: pending + decoder.flush() }
          }
          const hold = heldBack(pending, stops)
          const text = pending.slice(0, pending.length - hold)
          pending = pending.slice(pending.length - hold)
          return { token, text }
        })
        return Stream.repeatEffectOption(step)
      })).pipe(Stream.withSpan("Llm.generate", { attributes: { file } }))

    const chatPrompt: Model["chatPrompt"] = (messages, chatOptions = {}) =>
      Effect.flatMap(
        chatOptions.template !== undefined ? Effect.succeed(chatOptions.template) : template,
        (name) => promptTokens(ChatTemplate.apply(name, messages), chatOptions)
      )

    const chat: Model["chat"] = (messages, chatOptions = {}) =>
      Stream.unwrap(Effect.map(chatPrompt(messages, chatOptions), (tokens) => generate(tokens, chatOptions)))

    const embed: Model["embed"] = (input, embedOptions = {}) =>
      Effect.gen(function*() {
        const pooling = embedOptions.pooling ?? h.pooling
        if (pooling === "unsupported") {
          return yield* new ModelError({ file, problem: "its pooling_type is none of none, mean and last" })
        }
        const tokens = yield* promptTokens(input, embedOptions)
        const rows = yield* lock.withPermits(1)(Effect.gen(function*() {
          yield* context.truncate(0)
          cached = []
          const all = yield* context.embed(tokens)
          cached = [...tokens]
          return all
        }))
        const n = h.hidden
        const pooled = pooling === "none"
          ? rows
          : pooling === "last"
          ? rows.slice((tokens.length - 1) * n)
          : rows.reduce((sum, v, i) => (sum[i % n] += v / tokens.length, sum), new Float32Array(n))
        if (embedOptions.normalize === true) {
          for (let at = 0; at < pooled.length; at += n) {
            const row = pooled.subarray(at, at + n)
            const length = Math.sqrt(row.reduce((sum, v) => sum + v * v, 0))
            if (length > 0) row.forEach((v, i) => (row[i] = v / length))
          }
        }
        return pooled
      }).pipe(Effect.withSpan("Llm.embed", { attributes: { file } }))

    const evaluate: Model["evaluate"] = (tokens) =>
      Effect.zipRight(
        promptTokens(tokens),
        lock.withPermits(1)(Effect.gen(function*() {
          yield* context.truncate(0)
          cached = []
          const logits = yield* context.evaluate(tokens, { allLogits: true })
          cached = [...tokens]
          return logits
        }))
      )

    return {
      file,
      device,
      hyperparameters: h,
      tokenizer,
      context,
      bytes: weights.bytes,
      prompt: promptTokens,
      generate,
      chatTemplate: template._tag === "Right" ? template.right : undefined,
      chatPrompt,
      chat,
      embed,
      evaluate
    }
  }).pipe(Effect.withSpan("Llm.make", { attributes: { file } }))

/**
 * A model from the bytes of a GGUF file.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromBytes = (
  bytes: Uint8Array,
  options: LoadOptions & { readonly file?: string } = {}
): Effect.Effect<Model, LoadError | NoAdapter, Scope.Scope | Registry.Registry> =>
  Effect.flatMap(
    Gguf.parse(bytes, { file: options.file ?? "<bytes>" }),
    (gguf) => make(options.file ?? "<bytes>", gguf, bytes, options)
  )

/**
 * A model from a GGUF file in a Blob: in a browser, a File from a file input or a fetched Response's
 * blob. Its bytes are read a slice at a time as they go to the device, so the model is never whole in
 * memory; `file` names it in failures (default: a File's name).
 *
 * @example
 * ```ts
 * import { Llm } from "@effect-gpu/llm"
 * import { WebGpu } from "@effect-gpu/webgpu"
 * import { Effect, Stream } from "effect"
 *
 * // file: the File of an <input type="file">
 * export const run = (file: File) =>
 *   Effect.gen(function*() {
 *     const model = yield* Llm.fromBlob(file, { size: 2048 })
 *     yield* model.generate("Once upon a time", { maxTokens: 32 }).pipe(
 *       Stream.runForEach((g) => Effect.sync(() => console.log(g.text)))
 *     )
 *   }).pipe(Effect.scoped, Effect.provide(WebGpu.layerOrCpu()))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromBlob = (
  blob: Blob,
  options: LoadOptions & { readonly file?: string } = {}
): Effect.Effect<Model, LoadError | NoAdapter, Scope.Scope | Registry.Registry> =>
  Effect.flatMap(
    ModelFile.fromBlob(blob, options.file !== undefined ? { file: options.file } : {}),
    (f) => make(f.path, f.gguf, f.source, options)
  )

/**
 * A model from a GGUF file, read by offset (a model larger than memory's largest buffer loads).
 *
 * @example
 * ```ts
 * import { Cpu } from "@effect-gpu/core"
 * import { Llm } from "@effect-gpu/llm"
 * import { NodeFileSystem } from "@effect/platform-node"
 * import { Effect, Layer, Stream } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const model = yield* Llm.load("model.gguf", { size: 2048 })
 *   yield* model.generate("Once upon a time", { maxTokens: 32, temperature: 0.7, seed: 1 }).pipe(
 *     Stream.runForEach((g) => Effect.sync(() => process.stdout.write(g.text)))
 *   )
 * }).pipe(Effect.scoped, Effect.provide(Layer.merge(Cpu.layer(), NodeFileSystem.layer)))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const load = (
  path: string,
  options: LoadOptions = {}
): Effect.Effect<Model, LoadError | NoAdapter, Scope.Scope | Registry.Registry | FileSystem.FileSystem> =>
  Effect.flatMap(ModelFile.open(path), (f) => make(path, f.gguf, f.source, options))

/**
 * Loads the model at `path` with its progress as a Stream: `progress` emits after each tensor and ends
 * when the model is loaded (it fails as the load does); `model` waits for it. The load runs in the
 * background within the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const loadWithProgress = (
  path: string,
  options: Omit<LoadOptions, "onProgress"> = {}
): Effect.Effect<
  {
    readonly progress: Stream.Stream<Weights.Progress, LoadError | NoAdapter>
    readonly model: Effect.Effect<Model, LoadError | NoAdapter>
  },
  never,
  Scope.Scope | Registry.Registry | FileSystem.FileSystem
> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const mailbox = yield* Mailbox.make<Weights.Progress, LoadError | NoAdapter>()
    const fiber = yield* load(path, { ...options, onProgress: (p) => Effect.asVoid(mailbox.offer(p)) }).pipe(
      Scope.extend(scope),
      Effect.onExit((exit) => Exit.isSuccess(exit) ? mailbox.end : mailbox.failCause(exit.cause)),
      Effect.forkIn(scope)
    )
    return { progress: Mailbox.toStream(mailbox), model: Fiber.join(fiber) }
  })

/**
 * The model at `path` as the Llm service.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  path: string,
  options: LoadOptions = {}
): Layer.Layer<Llm, LoadError | NoAdapter, Registry.Registry | FileSystem.FileSystem> =>
  Layer.scoped(Llm, load(path, options))

/**
 * `layer`, with the model's path and the context's options read from Config (the device: the registry's
 * best).
 *
 * @example
 * import { Llm } from "@effect-gpu/llm"
 * import { Config } from "effect"
 *
 * // MODEL=m.gguf CONTEXT=2048
 * export const model = Llm.layerConfig({
 *   path: Config.string("MODEL"),
 *   size: Config.integer("CONTEXT").pipe(Config.withDefault(4096))
 * })
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<{ readonly path: string } & Context.Options>
): Layer.Layer<Llm, LoadError | NoAdapter | ConfigError.ConfigError, Registry.Registry | FileSystem.FileSystem> =>
  Layer.unwrapEffect(Effect.map(Config.unwrap(config), ({ path, ...options }) => layer(path, options)))
