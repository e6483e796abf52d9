import { Cpu } from "@effect-gpu/core"
import { ChatTemplate, Fixture, Llm } from "@effect-gpu/llm"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"

// the conversation of llama.cpp's chat-template test: a system message, turns, an assistant reply with spaces
const chat: ReadonlyArray<ChatTemplate.Message> = [
  { role: "system", content: "You are a helpful assistant" },
  { role: "user", content: "Hello" },
  { role: "assistant", content: "Hi there" },
  { role: "user", content: "Who are you" },
  { role: "assistant", content: "   I am an assistant   " },
  { role: "user", content: "Another question" }
]

// each format's text of it, as llama.cpp's llama_chat_apply_template writes it (with the assistant's opening)
const written: Record<ChatTemplate.Name, string> = {
  chatml: "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n" +
    "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n" +
    "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n" +
    "<|im_start|>assistant\n",
  llama3: "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>" +
    "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>" +
    "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>" +
    "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>" +
    "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>" +
    "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>" +
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
  llama2: "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]" +
    "   I am an assistant   </s>[INST] Another question [/INST]",
  "llama2-sys": "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>" +
    "[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]",
  "llama2-sys-bos": "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>" +
    "<s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]",
  "llama2-sys-strip": "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>" +
    "[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]",
  "mistral-v1": " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]" +
    "    I am an assistant   </s> [INST] Another question [/INST]",
  "mistral-v3": "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST]" +
    " I am an assistant</s>[INST] Another question[/INST]",
  "mistral-v3-tekken": "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]" +
    "   I am an assistant   </s>[INST]Another question[/INST]",
  "mistral-v7": "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>" +
    "[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]",
  "mistral-v7-tekken": "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>" +
    "[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"
}

// pieces of real models' Jinja templates, by the format llama.cpp detects in them
const templates: ReadonlyArray<readonly [string, ChatTemplate.Name | undefined]> = [
  ["{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']}}", "chatml"],
  [
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + " +
    "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}",
    "llama3"
  ],
  ["{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}", "llama2"],
  [
    "{{ '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' }}{{ '[INST] ' + content.strip() + ' [/INST]' }}",
    "llama2-sys-strip"
  ],
  ["{{ bos_token + '[INST] ' + '<<SYS>>' }}", "llama2-sys-bos"],
  ["{{ '[INST] <<SYS>>\\n' + message['content'] }}", "llama2-sys"],
  ["{{- bos_token }}{%- if system_message is defined %}{{- ' [INST] ' + system_message }}", "mistral-v1"],
  ["{%- if tools %}{{- '[AVAILABLE_TOOLS] [' }}{%- endif %}{{- '[INST] ' + message['content'] }}", "mistral-v3"],
  ["{{- \"[AVAILABLE_TOOLS]\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}", "mistral-v3-tekken"],
  ["{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' }}", "mistral-v7"],
  ["llama3", "llama3"],
  // Phi 4 marks <|im_start|> but is not ChatML; Gemma's turns are none of these
  ["{{'<|im_start|>' + message['role'] + '<|im_sep|>'}}", undefined],
  ["{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", undefined]
]

const collect = <A, E>(stream: Stream.Stream<A, E>) => Effect.map(Stream.runCollect(stream), Chunk.toArray)

describe("ChatTemplate", () => {
  it("writes each format as llama.cpp does", () => {
    for (const name of ChatTemplate.names) {
      assert.strictEqual(ChatTemplate.apply(name, chat), written[name], name)
    }
    // without the assistant's opening, where a format has one
    assert.strictEqual(
      ChatTemplate.apply("chatml", chat.slice(0, 2), { addAssistant: false }),
      "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
    )
  })

  it("detects the format in a model's Jinja template by llama.cpp's markers", () => {
    for (const [template, name] of templates) assert.strictEqual(ChatTemplate.detect(template), name, template)
  })

  it.scoped("a model chats in its template's format; an unknown template loads, and chat then asks for a format", () =>
    Effect.gen(function*() {
      const base = { ...Fixture.demo, seed: 5 }
      const qwen = yield* Llm.fromBytes(Fixture.make({ ...base, chatTemplate: templates[0][0] }), { size: 256 })
      assert.strictEqual(qwen.chatTemplate, "chatml")
      const options = { temperature: 0, maxTokens: 8, ignoreEndOfGeneration: true }
      const replied = yield* collect(qwen.chat(chat.slice(0, 2), options))
      const asText = yield* collect(qwen.generate(ChatTemplate.apply("chatml", chat.slice(0, 2)), options))
      assert.deepStrictEqual(replied.map((g) => g.token), asText.map((g) => g.token))
      assert.strictEqual(replied.length, 8)
      // a named format instead of the model's
      const asLlama3 = yield* collect(qwen.chat(chat.slice(0, 2), { ...options, template: "llama3" }))
      const llama3Text = yield* collect(qwen.generate(ChatTemplate.apply("llama3", chat.slice(0, 2)), options))
      assert.deepStrictEqual(asLlama3.map((g) => g.token), llama3Text.map((g) => g.token))
      // none in the file: ChatML, as llama.cpp's server
      assert.strictEqual((yield* Llm.fromBytes(Fixture.make(base), { size: 256 })).chatTemplate, "chatml")
      const odd = yield* Llm.fromBytes(Fixture.make({ ...base, chatTemplate: templates[12][0] }), {
        size: 256,
        file: "gemma-like"
      })
      assert.isUndefined(odd.chatTemplate)
      const error = yield* Effect.flip(collect(odd.chat(chat.slice(0, 2), options)))
      assert.strictEqual(error._tag, "ModelError")
      assert.include(error.message, "gemma-like: its chat template is none of the formats known here")
      assert.strictEqual((yield* collect(odd.chat(chat.slice(0, 2), { ...options, template: "chatml" }))).length, 8)
    }).pipe(Effect.provide(Cpu.layer())))
})
