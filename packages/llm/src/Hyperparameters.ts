/**
 * A llama-family model's shape, read from its GGUF metadata as llama.cpp reads it: sizes, heads, norm
 * epsilon, rope, context length, vocabulary, whether the output head is tied to the embedding.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Gguf from "./Gguf.js"
import { ModelError } from "./ModelError.js"

/**
 * @since 0.1.0
 * @category models
 */
export type Architecture = "llama" | "qwen2" | "qwen3"

/**
 * @since 0.1.0
 * @category models
 */
export interface Hyperparameters {
  readonly architecture: Architecture
  readonly hidden: number
  readonly layers: number
  readonly heads: number
  readonly kvHeads: number
  readonly headDim: number
  readonly ffn: number
  readonly vocab: number
  readonly contextLength: number
  readonly rmsEps: number
  readonly ropeFreqBase: number
  /** rope's dimensions per head (llama.cpp's n_rot) */
  readonly ropeDims: number
  /** NeoX-style rope (pairs split by halves), as qwen2 and qwen3 use; llama's pairs are adjacent */
  readonly ropeNeox: boolean
  /** no output.weight: the head reuses token_embd */
  readonly tiedEmbeddings: boolean
  /**
   * how the model's embeddings pool its tokens' (`{arch}.pooling_type`, as embedding models such as
   * Qwen3-Embedding name it: 1 mean, 3 last); "none" where it names none, "unsupported" for another kind
   */
  readonly pooling: "none" | "mean" | "last" | "unsupported"
}

const ARCHITECTURES: ReadonlyArray<Architecture> = ["llama", "qwen2", "qwen3"]

/**
 * Reads the hyperparameters of `gguf` (`file` names it in failures): a missing or mistyped key, an
 * architecture outside the llama family, or shapes that do not fit together fail with ModelError.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromGguf = (gguf: Gguf.GgufFile, file = "<bytes>"): Effect.Effect<Hyperparameters, ModelError> =>
  Effect.try({
    try: () => {
      const fail = (problem: string) => new ModelError({ file, problem })
      const value = (key: string) => {
        const v = gguf.metadata.get(key)
        if (v === undefined) throw fail(`metadata ${key} is missing`)
        return v
      }
      const string = (key: string) => {
        const v = value(key)
        if (v.type !== "string") throw fail(`metadata ${key} is a ${v.type}, not a string`)
        return v.value
      }
      const number = (key: string, fallback?: number) => {
        if (fallback !== undefined && !gguf.metadata.has(key)) return fallback
        const v = value(key)
        if (v.type === "string" || v.type === "bool" || v.type === "array" || typeof v.value !== "number") {
          throw fail(`metadata ${key} is a ${v.type}, not a number`)
        }
        return v.value
      }
      const arch = string("general.architecture")
      const architecture = ARCHITECTURES.find((a) => a === arch)
      if (architecture === undefined) {
        throw fail(`architecture ${arch} is not one this runner takes (${ARCHITECTURES.join(", ")})`)
      }
      const hidden = number(`${arch}.embedding_length`)
      const heads = number(`${arch}.attention.head_count`)
      const kvHeads = number(`${arch}.attention.head_count_kv`, heads)
      if (heads <= 0 || kvHeads <= 0 || heads % kvHeads !== 0) {
        throw fail(`${kvHeads} KV heads do not divide ${heads} heads`)
      }
      const headDim = number(`${arch}.attention.key_length`, hidden / heads)
      if (!Number.isInteger(headDim)) throw fail(`${heads} heads do not divide the hidden size ${hidden}`)
      const tokens = gguf.metadata.get("tokenizer.ggml.tokens")
      const vocab = number(`${arch}.vocab_size`, tokens?.type === "array" ? tokens.value.length : 0)
      if (vocab <= 0) throw fail("the vocabulary size is missing (no vocab_size and no tokenizer.ggml.tokens)")
      return {
        architecture,
        hidden,
        layers: number(`${arch}.block_count`),
        heads,
        kvHeads,
        headDim,
        ffn: number(`${arch}.feed_forward_length`),
        vocab,
        contextLength: number(`${arch}.context_length`),
        rmsEps: number(`${arch}.attention.layer_norm_rms_epsilon`),
        ropeFreqBase: number(`${arch}.rope.freq_base`, 10000),
        ropeDims: number(`${arch}.rope.dimension_count`, headDim),
        ropeNeox: architecture !== "llama",
        tiedEmbeddings: !gguf.tensors.some((t) => t.name === "output.weight"),
        pooling: (["none", "mean", "unsupported", "last"] as const)[number(`${arch}.pooling_type`, 0)] ?? "unsupported"
      }
    },
    catch: (e) => e instanceof ModelError ? e : new ModelError({ file, problem: String(e) })
  })
