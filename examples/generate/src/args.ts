/**
 * The generate command's arguments: parsed by hand (a dozen flags), failing with UsageError that says
 * which flag and why.
 */
import { ChatTemplate } from "@effect-gpu/llm"
import { Data, Effect } from "effect"

export class UsageError extends Data.TaggedError("UsageError")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}

export interface Args {
  readonly model: string | undefined
  readonly prompt: string
  /** whether --prompt was given (a conversation's first message), not the default */
  readonly promptGiven: boolean
  readonly promptTokens: ReadonlyArray<number> | undefined
  readonly maxTokens: number
  readonly device: "best" | "cpu" | "webgpu"
  readonly json: boolean
  readonly greedy: boolean
  readonly temperature: number | undefined
  readonly topK: number | undefined
  readonly topP: number | undefined
  readonly minP: number | undefined
  readonly repeatPenalty: number | undefined
  readonly seed: number | undefined
  readonly context: number | undefined
  readonly ubatch: number | undefined
  readonly ignoreEos: boolean
  /** the prompt as the user's message in the model's chat template (or `chatTemplate`), after `system` */
  readonly chat: boolean
  /** a conversation: the user's messages read from stdin a line each, every reply in the chat's history */
  readonly conversation: boolean
  readonly system: string | undefined
  readonly chatTemplate: ChatTemplate.Name | undefined
  readonly help: boolean
}

export const usage = `pnpm generate [--model m.gguf] [--prompt "..."] [options]

  --model PATH          a GGUF model (llama, qwen2, qwen3); without it, a small synthetic model made in memory
  --prompt TEXT         the prompt (default "Once upon a time")
  --prompt-tokens 1,2,3 token ids used exactly as given (no BOS added) instead of --prompt
  --max-tokens N        tokens to generate at most (default 64)
  --device cpu|webgpu   where to run (default: the best device there is)
  --greedy              always the likeliest token (temperature 0)
  --temperature T --top-k K --top-p P --min-p P --repeat-penalty R --seed S   sampling
  --context N           positions the KV cache holds (default: the model's, at most 4096)
  --ubatch N            the prompt's micro-batch (default 512)
  --ignore-eos          go on past end-of-generation tokens
  --chat                the prompt as a user's message in the model's chat template: the assistant's reply
  --conversation        a chat read from stdin, a message a line, each reply kept in its history (with --prompt,
                        that is the first message); its cached positions are reused from turn to turn
  --system TEXT         with --chat or --conversation, a system message first
  --chat-template NAME  with --chat or --conversation, this format instead of the model's:
                        ${ChatTemplate.names.join(", ")}
  --json                print one JSON object {"tokens","text","prompt_tok_s","gen_tok_s"} and nothing else
  --help                this text`

const numeric = new Set([
  "--max-tokens",
  "--temperature",
  "--top-k",
  "--top-p",
  "--min-p",
  "--repeat-penalty",
  "--seed",
  "--context",
  "--ubatch"
])
const valued = new Set([
  ...numeric,
  "--model",
  "--prompt",
  "--prompt-tokens",
  "--device",
  "--system",
  "--chat-template"
])
const flags = new Set(["--json", "--greedy", "--ignore-eos", "--chat", "--conversation", "--help"])

export const parse = (argv: ReadonlyArray<string>): Effect.Effect<Args, UsageError> =>
  Effect.gen(function*() {
    const values = new Map<string, string>()
    const set = new Set<string>()
    for (let i = 0; i < argv.length; i++) {
      const arg = argv[i]
      if (arg === "--") continue
      if (flags.has(arg)) {
        set.add(arg)
      } else if (valued.has(arg)) {
        const value = argv[++i]
        if (value === undefined) return yield* new UsageError({ reason: `${arg} needs a value` })
        values.set(arg, value)
      } else {
        return yield* new UsageError({ reason: `unknown argument ${arg} (see --help)` })
      }
    }
    const number = (flag: string) =>
      Effect.gen(function*() {
        const v = values.get(flag)
        if (v === undefined) return undefined
        const n = Number(v)
        if (v.trim() === "" || !Number.isFinite(n)) {
          return yield* new UsageError({ reason: `${flag} takes a number, not ${v}` })
        }
        return n
      })
    const device = values.get("--device") ?? "best"
    if (device !== "best" && device !== "cpu" && device !== "webgpu") {
      return yield* new UsageError({ reason: `--device takes cpu or webgpu, not ${device}` })
    }
    const tokensText = values.get("--prompt-tokens")
    let promptTokens: Array<number> | undefined
    if (tokensText !== undefined) {
      promptTokens = tokensText.split(",").map((t) => Number(t.trim()))
      if (promptTokens.length === 0 || promptTokens.some((t) => !Number.isSafeInteger(t) || t < 0)) {
        return yield* new UsageError({ reason: `--prompt-tokens takes token ids like 1,2,3, not ${tokensText}` })
      }
    }
    const conversation = set.has("--conversation")
    const chat = set.has("--chat") || conversation
    if (conversation && set.has("--json")) {
      return yield* new UsageError({ reason: "--conversation prints its replies as they come, not --json" })
    }
    const template = values.get("--chat-template")
    if (template !== undefined && !ChatTemplate.isName(template)) {
      return yield* new UsageError({
        reason: `--chat-template takes one of ${ChatTemplate.names.join(", ")}, not ${template}`
      })
    }
    for (const flag of ["--system", "--chat-template"]) {
      if (values.has(flag) && !chat) {
        return yield* new UsageError({ reason: `${flag} goes with --chat or --conversation` })
      }
    }
    if (chat && promptTokens !== undefined) {
      return yield* new UsageError({
        reason: `${conversation ? "--conversation" : "--chat"} takes text, not --prompt-tokens`
      })
    }
    const maxTokens = (yield* number("--max-tokens")) ?? 64
    if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
      return yield* new UsageError({ reason: `--max-tokens takes a whole number from 1, not ${maxTokens}` })
    }
    return {
      model: values.get("--model"),
      prompt: values.get("--prompt") ?? "Once upon a time",
      promptGiven: values.has("--prompt"),
      promptTokens,
      maxTokens,
      device,
      json: set.has("--json"),
      greedy: set.has("--greedy"),
      temperature: yield* number("--temperature"),
      topK: yield* number("--top-k"),
      topP: yield* number("--top-p"),
      minP: yield* number("--min-p"),
      repeatPenalty: yield* number("--repeat-penalty"),
      seed: yield* number("--seed"),
      context: yield* number("--context"),
      ubatch: yield* number("--ubatch"),
      ignoreEos: set.has("--ignore-eos"),
      chat,
      conversation,
      system: values.get("--system"),
      chatTemplate: template,
      help: set.has("--help")
    }
  })
