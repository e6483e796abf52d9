/**
 * Chat messages as a model's prompt text, as llama.cpp's `llama_chat_apply_template` writes them: not a
 * Jinja interpreter, but the formats of the families this package runs (ChatML for Qwen and many llama
 * fine-tunes, Llama 3, Llama 2 and Mistral's [INST] variants), each recognized in the model's
 * `tokenizer.chat_template` by the markers llama.cpp looks for, or named outright. A model without a
 * template gets ChatML, as llama.cpp's server gives it.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Gguf from "./Gguf.js"
import { ModelError } from "./ModelError.js"

/**
 * The formats, by llama.cpp's names for them (`--chat-template NAME`).
 *
 * @since 0.1.0
 * @category models
 */
export const names = [
  "chatml",
  "llama3",
  "llama2",
  "llama2-sys",
  "llama2-sys-bos",
  "llama2-sys-strip",
  "mistral-v1",
  "mistral-v3",
  "mistral-v3-tekken",
  "mistral-v7",
  "mistral-v7-tekken"
] as const

/**
 * @since 0.1.0
 * @category models
 */
export type Name = typeof names[number]

/**
 * Whether `text` is one of the formats' names.
 *
 * @since 0.1.0
 * @category guards
 */
export const isName = (text: string): text is Name => (names as ReadonlyArray<string>).includes(text)

/**
 * A message of a chat: its role (`system`, `user`, `assistant`, or another the template writes as given)
 * and its text.
 *
 * @since 0.1.0
 * @category models
 */
export interface Message {
  readonly role: string
  readonly content: string
}

/**
 * The format a Jinja chat template (or a format's name) is, by the markers llama.cpp's detection looks
 * for; undefined where it is none of these.
 *
 * @since 0.1.0
 * @category constructors
 */
export const detect = (template: string): Name | undefined => {
  if (isName(template)) return template
  const has = (marker: string) => template.includes(marker)
  // (<|im_sep|> is Phi 4's and <end_of_utterance> SmolVLM's: they mark <|im_start|> but are not ChatML)
  if (has("<|im_start|>")) return has("<|im_sep|>") || has("<end_of_utterance>") ? undefined : "chatml"
  if (template.startsWith("mistral") || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return "mistral-v7"
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      return has(" [INST]") ? "mistral-v1" : has("\"[INST]\"") ? "mistral-v3-tekken" : "mistral-v3"
    }
    return has("content.strip()")
      ? "llama2-sys-strip"
      : has("bos_token + '[INST]")
      ? "llama2-sys-bos"
      : has("<<SYS>>")
      ? "llama2-sys"
      : "llama2"
  }
  return has("<|start_header_id|>") && has("<|end_header_id|>") ? "llama3" : undefined
}

/**
 * The format of a model's `tokenizer.chat_template` (ChatML where it has none); a template of another
 * format fails with ModelError naming it (give a Name instead, as llama.cpp's `--chat-template`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromGguf = (gguf: Gguf.GgufFile, file = "<bytes>"): Effect.Effect<Name, ModelError> => {
  const value = gguf.metadata.get("tokenizer.chat_template")
  if (value === undefined) return Effect.succeed("chatml")
  if (value.type !== "string") {
    return Effect.fail(new ModelError({ file, problem: "tokenizer.chat_template must be a string" }))
  }
  const name = detect(value.value)
  return name !== undefined ? Effect.succeed(name) : Effect.fail(
    new ModelError({
      file,
      problem: `its chat template is none of the formats known here (${names.join(", ")}): ${
        JSON.stringify(value.value.slice(0, 80))
      }...`
    })
  )
}

/** whitespace off both ends, as llama.cpp's trim (C's isspace: space, \t, \n, \v, \f, \r) */
const trim = (text: string) => text.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, "")

/**
 * The prompt text of `messages` in format `name`; `addAssistant` (default true) ends it with the opening
 * of the assistant's turn where the format has one. Special tokens are written as their text: tokenize it
 * with special tokens parsed (Llm's `chat` does).
 *
 * @since 0.1.0
 * @category formatting
 */
export const apply = (
  name: Name,
  messages: ReadonlyArray<Message>,
  options: { readonly addAssistant?: boolean } = {}
): string => {
  const addAssistant = options.addAssistant ?? true
  let out = ""
  switch (name) {
    case "chatml": {
      for (const m of messages) out += `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`
      return addAssistant ? out + "<|im_start|>assistant\n" : out
    }
    case "llama3": {
      for (const m of messages) out += `<|start_header_id|>${m.role}<|end_header_id|>\n\n${trim(m.content)}<|eot_id|>`
      return addAssistant ? out + "<|start_header_id|>assistant<|end_header_id|>\n\n" : out
    }
    case "mistral-v7":
    case "mistral-v7-tekken": {
      const space = name === "mistral-v7" ? " " : ""
      for (const m of messages) {
        out += m.role === "system"
          ? `[SYSTEM_PROMPT]${space}${m.content}[/SYSTEM_PROMPT]`
          : m.role === "user"
          ? `[INST]${space}${m.content}[/INST]`
          : `${space}${m.content}</s>`
      }
      return out
    }
    case "mistral-v1":
    case "mistral-v3":
    case "mistral-v3-tekken": {
      const before = name === "mistral-v1" ? " " : ""
      const after = name === "mistral-v3-tekken" ? "" : " "
      let inTurn = false
      for (const m of messages) {
        if (!inTurn) {
          out += `${before}[INST]${after}`
          inTurn = true
        }
        if (m.role === "system") out += `${m.content}\n\n`
        else if (m.role === "user") out += `${m.content}${before}[/INST]`
        else {
          out += `${after}${name === "mistral-v3" ? trim(m.content) : m.content}</s>`
          inTurn = false
        }
      }
      return out
    }
    default: {
      // Llama 2: the first turn's [INST] without BOS (the tokenizer adds it), a later one's with it where
      // the variant puts BOS inside the history
      const system = name !== "llama2"
      let inTurn = true
      out = "[INST] "
      for (const m of messages) {
        const content = name === "llama2-sys-strip" ? trim(m.content) : m.content
        if (!inTurn) {
          inTurn = true
          out += name === "llama2-sys-bos" ? "<s>[INST] " : "[INST] "
        }
        if (m.role === "system") out += system ? `<<SYS>>\n${content}\n<</SYS>>\n\n` : `${content}\n`
        else if (m.role === "user") out += `${content} [/INST]`
        else {
          out += `${content}</s>`
          inTurn = false
        }
      }
      return out
    }
  }
}
