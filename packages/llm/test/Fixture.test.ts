import { Fixture, Gguf } from "@effect-gpu/llm"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

const small = { hidden: 256, layers: 2, heads: 8, kvHeads: 2, ffn: 512, vocab: 300 } as const

describe("fixtures", () => {
  for (
    const [architecture, dtype] of [["llama", "q4_0"], ["qwen2", "q8_0"], ["qwen3", "q4_K"], ["llama", "f16"]] as const
  ) {
    it.effect(`a ${architecture} model in ${dtype}: llama.cpp's names, shapes, types and metadata`, () =>
      Effect.gen(function*() {
        const bytes = Fixture.make({ architecture, dtype, ...small })
        const file = yield* Gguf.parse(bytes, { file: "fixture.gguf" })
        const meta = (key: string) => file.metadata.get(key)?.value
        assert.strictEqual(meta("general.architecture"), architecture)
        assert.strictEqual(meta(`${architecture}.embedding_length`), 256)
        assert.strictEqual(meta(`${architecture}.block_count`), 2)
        assert.strictEqual(meta(`${architecture}.attention.head_count_kv`), 2)
        assert.strictEqual((meta("tokenizer.ggml.tokens") as ReadonlyArray<string>).length, 300)
        assert.strictEqual(meta("tokenizer.ggml.model"), architecture === "llama" ? "llama" : "gpt2")
        const byName = new Map(file.tensors.map((t) => [t.name, t]))
        const expect = (name: string, type: string, ne: ReadonlyArray<number>) => {
          const t = byName.get(name)
          assert.isDefined(t, name)
          assert.strictEqual(t!.dtype, type, name)
          assert.deepStrictEqual(t!.ne.slice(0, ne.length), [...ne], name)
        }
        expect("token_embd.weight", dtype, [256, 300])
        expect("output.weight", dtype, [256, 300])
        expect("output_norm.weight", "f32", [256])
        for (const b of ["blk.0", "blk.1"]) {
          expect(`${b}.attn_q.weight`, dtype, [256, 256])
          expect(`${b}.attn_k.weight`, dtype, [256, 64]) // 2 KV heads of 32
          expect(`${b}.attn_output.weight`, dtype, [256, 256])
          expect(`${b}.ffn_gate.weight`, dtype, [256, 512])
          expect(`${b}.ffn_down.weight`, dtype, [512, 256])
          assert.strictEqual(byName.has(`${b}.attn_q.bias`), architecture === "qwen2")
          assert.strictEqual(byName.has(`${b}.attn_q_norm.weight`), architecture === "qwen3")
        }
        // the same options give the same bytes
        assert.deepStrictEqual(Fixture.make({ architecture, dtype, ...small }), bytes)
      }))
  }

  it("tied embeddings leave out the output head; vocabularies keep their special and byte tokens", () => {
    const tied = Fixture.make({ architecture: "llama", dtype: "f32", ...small, tiedEmbeddings: true })
    const file = Effect.runSync(Gguf.parse(tied))
    assert.isFalse(file.tensors.some((t) => t.name === "output.weight"))
    const spm = Fixture.vocabulary("llama", 300)
    assert.deepStrictEqual(spm.tokens.slice(0, 4), ["<unk>", "<s>", "</s>", "<0x00>"])
    assert.strictEqual(new Set(spm.tokens).size, 300)
    const bpe = Fixture.vocabulary("gpt2", 300)
    assert.strictEqual(bpe.tokens[bpe.bos], "<|begin_of_text|>")
    assert.strictEqual(new Set(bpe.tokens).size, 300)
    // every merge makes a token of the vocabulary
    for (const m of bpe.merges) assert.include(bpe.tokens, m.replace(" ", ""))
  })

  it.effect("written a piece at a time: the same bytes; tiled, the same header and sizes with repeated rows", () =>
    Effect.gen(function*() {
      const options = { architecture: "qwen3", dtype: "q4_0", ...small } as const
      const pieces: Array<Uint8Array> = []
      const n = Fixture.write(options, (b) => pieces.push(b.slice()))
      const joined = new Uint8Array(n)
      pieces.reduce((at, p) => (joined.set(p, at), at + p.byteLength), 0)
      assert.deepStrictEqual(joined, Fixture.make(options))
      const tiled: Array<Uint8Array> = []
      const size = Fixture.write(options, (b) => tiled.push(b.slice()), { tile: 512 })
      assert.strictEqual(size, n)
      const bytes = new Uint8Array(size)
      tiled.reduce((at, p) => (bytes.set(p, at), at + p.byteLength), 0)
      const file = yield* Gguf.parse(bytes)
      const gate = file.tensors.find((t) => t.name === "blk.0.ffn_gate.weight")!
      // 512 values are two rows of 256: row 2 repeats row 0
      const row = gate.nbytes / gate.ne[1]
      assert.deepStrictEqual(
        bytes.subarray(gate.offset + 2 * row, gate.offset + 3 * row),
        bytes.subarray(gate.offset, gate.offset + row)
      )
      assert.notDeepEqual(
        bytes.subarray(gate.offset + row, gate.offset + 2 * row),
        bytes.subarray(gate.offset, gate.offset + row)
      )
    }))
})
