import { Fixture, Gguf, Hyperparameters } from "@effect-gpu/llm"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

const small = { hidden: 256, layers: 3, heads: 8, kvHeads: 2, ffn: 512, vocab: 300, dtype: "f32" } as const

describe("hyperparameters", () => {
  it.effect("read from a model's metadata as llama.cpp reads them", () =>
    Effect.gen(function*() {
      for (const architecture of ["llama", "qwen2", "qwen3"] as const) {
        const file = yield* Gguf.parse(
          Fixture.make({
            architecture,
            ...small,
            tiedEmbeddings: architecture === "qwen3",
            ...(architecture === "qwen3" ? { pooling: "last" as const } : {})
          })
        )
        const h = yield* Hyperparameters.fromGguf(file)
        assert.deepStrictEqual(h, {
          architecture,
          hidden: 256,
          layers: 3,
          heads: 8,
          kvHeads: 2,
          headDim: 32,
          ffn: 512,
          vocab: 300,
          contextLength: 2048,
          rmsEps: Math.fround(1e-5),
          ropeFreqBase: 10000,
          ropeDims: 32,
          ropeNeox: architecture !== "llama",
          tiedEmbeddings: architecture === "qwen3",
          pooling: architecture === "qwen3" ? "last" : "none"
        })
      }
    }))

  it.effect("a missing key, a foreign architecture or heads that do not fit fail with ModelError", () =>
    Effect.gen(function*() {
      const base = yield* Gguf.parse(Fixture.make({ architecture: "llama", ...small }))
      const edited = (edit: (m: Map<string, Gguf.Value>) => void) => {
        const metadata = new Map(base.metadata)
        edit(metadata)
        return Effect.flip(Hyperparameters.fromGguf({ ...base, metadata }, "m.gguf")).pipe(Effect.map((e) => e.message))
      }
      assert.strictEqual(
        yield* edited((m) => m.delete("llama.block_count")),
        "m.gguf: metadata llama.block_count is missing"
      )
      assert.strictEqual(
        yield* edited((m) => m.set("general.architecture", { type: "string", value: "gpt2" })),
        "m.gguf: architecture gpt2 is not one this runner takes (llama, qwen2, qwen3)"
      )
      assert.strictEqual(
        yield* edited((m) => m.set("llama.attention.head_count_kv", { type: "u32", value: 3 })),
        "m.gguf: 3 KV heads do not divide 8 heads"
      )
      assert.strictEqual(
        yield* edited((m) => m.set("llama.embedding_length", { type: "string", value: "256" })),
        "m.gguf: metadata llama.embedding_length is a string, not a number"
      )
    }))
})
