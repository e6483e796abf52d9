/**
 * generate: a GGUF model's tokens as they come, with prompt and generation speed at the end.
 *
 *   pnpm generate --model m.gguf --prompt "Once upon a time"
 *   pnpm generate                                   # no model: a small synthetic one, made in memory
 *   pnpm generate --model m.gguf --prompt-tokens 1,2,3 --greedy --max-tokens 16 --json
 *   pnpm generate --model m.gguf --chat --prompt "What is a GPU?"   # the reply, in the model's chat template
 *   pnpm generate --model m.gguf --conversation                      # a chat, a message a line from stdin
 */
import type { Device } from "@effect-gpu/core"
import { Cpu, Registry } from "@effect-gpu/core"
import { type ChatTemplate, Fixture, Llm, LlmMetrics } from "@effect-gpu/llm"
import { WebGpu } from "@effect-gpu/webgpu"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { ConfigError, Console, Effect, Metric, Stream } from "effect"
import * as readline from "node:readline"
import { type Args, parse, usage, UsageError } from "./args.js"

const write = (stream: NodeJS.WriteStream, text: string) => Effect.sync(() => stream.write(text))

/** the device asked for */
const pick = (args: Args) =>
  Effect.gen(function*() {
    if (args.device === "best") return yield* Registry.bestDevice
    const devices = yield* Registry.devices
    const found = devices.find((d: Device.Device) =>
      args.device === "cpu" ? d.name === "CPU" : d.name.startsWith("WebGPU")
    )
    if (found === undefined) return yield* new UsageError({ reason: `no ${args.device} device here` })
    return found
  })

/**
 * a bar on stderr while the weights load, redrawn each percent on a terminal; elsewhere (a log, a pipe)
 * only its last state, not a hundred redraws
 */
const progress = (args: Args) => {
  let shown = -1
  return (p: { readonly bytes: number; readonly total: number }) => {
    const percent = Math.floor((p.bytes / p.total) * 100)
    if (args.json || percent === shown || (!process.stderr.isTTY && p.bytes < p.total)) return Effect.void
    shown = percent
    return bar(p)
  }
}

const bar = (p: { readonly bytes: number; readonly total: number }) =>
  write(
    process.stderr,
    `\rloading [${"#".repeat(Math.round((p.bytes / p.total) * 30)).padEnd(30, ".")}] ${(p.bytes / 1e6).toFixed(1)}/${
      (p.total / 1e6).toFixed(1)
    } MB${p.bytes === p.total ? "\n" : ""}`
  )

/**
 * the devices a run needs: `--device cpu` the CPU alone, so that no GPU is started for it (nor its
 * driver's warnings printed); else WebGPU's where there is an adapter, and the CPU
 */
const devicesFor = (args: Args) => args.device === "cpu" ? Cpu.layer() : WebGpu.layerOrCpu()

const generate = Effect.fn("generate")(function*(args: Args) {
  const device = yield* pick(args)
  const options = {
    device,
    onProgress: progress(args),
    ...(args.context !== undefined ? { size: args.context } : {}),
    ...(args.ubatch !== undefined ? { ubatch: args.ubatch } : {})
  }
  const model = args.model === undefined
    ? yield* Effect.zipRight(
      args.json ? Effect.void : write(
        process.stderr,
        "no --model: a synthetic qwen3 model made in memory (Fixture.demo: 2 layers, a 300-token vocabulary, random weights:\n" +
          "its text is noise; it shows the path a real model takes)\n"
      ),
      Llm.fromBytes(
        Fixture.make(Fixture.demo),
        { ...options, file: "synthetic qwen3" }
      )
    )
    : yield* Effect.gen(function*() {
      // the loading bar follows the load's progress stream
      const { onProgress, ...rest } = options
      const loading = yield* Llm.loadWithProgress(args.model!, rest)
      yield* Stream.runForEach(loading.progress, onProgress)
      return yield* loading.model
    })
  if (!args.json) {
    yield* write(
      process.stderr,
      `${model.file} on ${device.name}: ${model.hyperparameters.architecture}, ${model.hyperparameters.layers} layers, ${
        (model.bytes / 1e6).toFixed(1)
      } MB\n`
    )
  }
  const sampling = {
    maxTokens: args.maxTokens,
    ignoreEndOfGeneration: args.ignoreEos,
    ...(args.greedy ? { temperature: 0 } : {}),
    ...Object.fromEntries(
      (["temperature", "topK", "topP", "minP", "repeatPenalty", "seed"] as const)
        .filter((k) => args[k] !== undefined && !(args.greedy && k === "temperature"))
        .map((k) => [k, args[k]])
    )
  }
  if (args.conversation) return yield* conversation(args, model, sampling)
  // the prompt's tokens, made once (a text's checked as generate would): --chat writes the prompt as the
  // user's message in the model's chat template, and only the reply is shown
  const prompt = args.chat
    ? yield* model.chatPrompt(
      [...(args.system !== undefined ? [{ role: "system", content: args.system }] : []), {
        role: "user",
        content: args.prompt
      }],
      args.chatTemplate !== undefined ? { template: args.chatTemplate } : {}
    )
    : args.promptTokens ?? (yield* model.prompt(args.prompt))
  const promptLength = prompt.length
  if (!args.json && !args.chat && args.promptTokens === undefined) yield* write(process.stdout, args.prompt)
  const tokens: Array<number> = []
  let text = ""
  const start = performance.now()
  let first = 0
  yield* model.generate(prompt, sampling).pipe(
    Stream.runForEach((g) =>
      Effect.gen(function*() {
        if (tokens.length === 0) first = performance.now()
        tokens.push(g.token)
        text += g.text
        if (!args.json) yield* write(process.stdout, g.text)
      })
    )
  )
  const end = performance.now()
  // the first token comes with the prompt's evaluation; each later one is one decoding step
  const promptTokS = tokens.length > 0 ? promptLength / ((first - start) / 1000) : 0
  const genTokS = tokens.length > 1 ? (tokens.length - 1) / ((end - first) / 1000) : 0
  if (args.json) {
    yield* Console.log(JSON.stringify({ tokens, text, prompt_tok_s: promptTokS, gen_tok_s: genTokS }))
  } else {
    yield* write(
      process.stderr,
      `\n\nprompt: ${promptLength} tokens, ${promptTokS.toFixed(1)} tok/s; generated: ${tokens.length} tokens, ${
        genTokS.toFixed(1)
      } tok/s\n`
    )
  }
})

/**
 * --conversation: the user's messages from stdin a line each (the first --prompt's where given), each
 * reply streamed to stdout and kept in the history the next turn is written from; a turn's prompt starts
 * as the last one's did, so the model reuses those cached positions and computes only what is new
 */
const conversation = (args: Args, model: Llm.Model, sampling: Llm.GenerateOptions) =>
  Effect.gen(function*() {
    const history: Array<ChatTemplate.Message> = args.system !== undefined
      ? [{ role: "system", content: args.system }]
      : []
    const ask = process.stdin.isTTY ? write(process.stderr, "> ") : Effect.void
    // the model's own counts of a turn's prompt tokens, computed and reused from its cache
    const counted = Effect.all(
      [LlmMetrics.promptTokens, LlmMetrics.reusedTokens].map((m) =>
        Effect.map(Metric.value(Metric.tagged(m, "model", model.file)), (s) => s.count)
      )
    )
    const turn = (message: string) =>
      Effect.gen(function*() {
        history.push({ role: "user", content: message })
        let reply = ""
        let tokens = 0
        const [computed, reused] = yield* counted
        yield* model.chat(history, { ...sampling, ...(args.chatTemplate ? { template: args.chatTemplate } : {}) })
          .pipe(Stream.runForEach((g) => (reply += g.text, tokens++, write(process.stdout, g.text))))
        history.push({ role: "assistant", content: reply })
        const [computedAfter, reusedAfter] = yield* counted
        yield* write(process.stdout, "\n")
        yield* write(
          process.stderr,
          `(prompt: ${computedAfter - computed + reusedAfter - reused} tokens, ${
            reusedAfter - reused
          } of them reused; ${tokens} generated)\n`
        )
        yield* ask
      })
    if (args.promptGiven) yield* turn(args.prompt)
    else yield* ask
    const lines = readline.createInterface({ input: process.stdin, terminal: false })
    yield* Stream.fromAsyncIterable(lines, (e) => new UsageError({ reason: `stdin: ${String(e)}` })).pipe(
      Stream.filter((line) => line.trim().length > 0),
      Stream.runForEach(turn),
      Effect.ensuring(Effect.sync(() => lines.close()))
    )
  })

// the arguments first: help and bad flags answer before any device starts
const program = Effect.gen(function*() {
  const args = yield* parse(process.argv.slice(2))
  if (args.help) return yield* Console.log(usage)
  return yield* generate(args).pipe(Effect.scoped, Effect.provide(devicesFor(args)))
})

program.pipe(
  Effect.catchTag(
    "UsageError",
    (e) => Effect.zipRight(Console.error(`${e.message}\n\n${usage}`), Effect.sync(() => process.exitCode = 2))
  ),
  // a model that cannot be used, or does not fit: the reason, not a stack
  Effect.catchTags({
    ModelError: (e) => Effect.zipRight(Console.error(e.message), Effect.sync(() => process.exitCode = 1)),
    AllocationError: (e) => Effect.zipRight(Console.error(e.message), Effect.sync(() => process.exitCode = 1))
  }),
  // a setting that cannot be read (EFFECT_GPU_WEBGPU_DEVICES=two): on stderr, so that --json's stdout stays clean
  Effect.catchIf(
    ConfigError.isConfigError,
    (e) => Effect.zipRight(Console.error(String(e)), Effect.sync(() => process.exitCode = 1))
  ),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain
)
