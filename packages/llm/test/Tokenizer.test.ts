import { Fixture, Gguf, Tokenizer } from "@effect-gpu/llm"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { readFileSync } from "node:fs"
import { specialStrings, strings, tokenizers } from "./oracle/cases.js"

/** llama.cpp's answers (tools/llama-oracle) */
const oracle = JSON.parse(readFileSync(new URL("./oracle/llama.cpp.json", import.meta.url), "utf8")) as {
  readonly tokenizers: Record<
    string,
    { readonly plain: Array<Array<number>>; readonly special: Array<Array<number>>; readonly text: Array<string> }
  >
}

const load = (options: Fixture.Options) =>
  Effect.flatMap(Gguf.parse(Fixture.make(options)), (file) => Tokenizer.fromGguf(file, "fixture.gguf"))

describe("tokenizers", () => {
  for (const { name, options } of tokenizers) {
    it.effect(`${name}: llama.cpp's tokens for ${strings.length} strings, and their text back`, () =>
      Effect.gen(function*() {
        const tokenizer = yield* load(options)
        const want = oracle.tokenizers[name]
        strings.forEach((s, i) => {
          assert.deepStrictEqual(tokenizer.tokenize(s, { addSpecial: false }), want.plain[i], JSON.stringify(s))
          assert.strictEqual(tokenizer.detokenize(want.plain[i]), want.text[i], `text of ${JSON.stringify(s)}`)
        })
        specialStrings.forEach((s, i) =>
          assert.deepStrictEqual(
            tokenizer.tokenize(s, { addSpecial: false, parseSpecial: true }),
            want.special[i],
            `${JSON.stringify(s)} with special tokens`
          )
        )
      }))
  }

  it.effect("BOS as the vocabulary asks; end-of-generation tokens; a streaming decoder holds back split characters", () =>
    Effect.gen(function*() {
      const spm = yield* load(tokenizers[0].options)
      assert.isTrue(spm.addBos)
      assert.strictEqual(spm.tokenize("a")[0], spm.bos)
      assert.isTrue(spm.endOfGeneration.has(spm.eos!))
      const qwen = yield* load(tokenizers[1].options)
      assert.isFalse(qwen.addBos)
      const llama3 = yield* load(tokenizers[2].options)
      assert.isTrue(llama3.addBos)
      assert.isTrue(
        llama3.endOfGeneration.has(llama3.tokenize("<|eot_id|>", { addSpecial: false, parseSpecial: true })[0])
      )
      // "€" is three bytes: in the SentencePiece vocabulary, three byte tokens
      const euro = spm.tokenize("€", { addSpecial: false }).filter((t) =>
        spm.piece(t).length === 1 && spm.piece(t)[0] >= 0x80
      )
      assert.strictEqual(euro.length, 3)
      const decoder = Tokenizer.decoder(spm)
      assert.strictEqual(decoder.push(euro[0]), "")
      assert.strictEqual(decoder.push(euro[1]), "")
      assert.strictEqual(decoder.push(euro[2]), "€")
      assert.strictEqual(decoder.push(euro[0]) + decoder.flush(), "\ufffd")
    }))

  it.effect("a vocabulary this reader does not know fails with ModelError", () =>
    Effect.gen(function*() {
      const file = yield* Gguf.parse(Fixture.make(tokenizers[1].options))
      const metadata = new Map(file.metadata)
      metadata.set("tokenizer.ggml.pre", { type: "string", value: "no-such-pre" })
      const exit = yield* Effect.exit(Tokenizer.fromGguf({ ...file, metadata }, "x.gguf"))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(exit), "pre-tokenizer no-such-pre is not supported")
      metadata.set("tokenizer.ggml.model", { type: "string", value: "bert" })
      const bert = yield* Effect.exit(Tokenizer.fromGguf({ ...file, metadata }, "x.gguf"))
      assert.include(String(bert), "tokenizer bert is not supported")
    }))
})
