/**
 * The fixtures llama.cpp is asked about (tools/llama-oracle writes its answers to llama.cpp.json): models
 * of each architecture in each weight type, the prompt they run and the strings the tokenizers split.
 * The models are made again from these options in the tests: the same options give the same bytes.
 */
import type { Fixture } from "@effect-gpu/llm"

const shape = { hidden: 256, layers: 2, heads: 4, kvHeads: 2, ffn: 512, vocab: 300, contextLength: 256 } as const

export const dtypes = ["f32", "f16", "q8_0", "q4_0", "q4_K", "q6_K"] as const

/** models whose next-token distributions and greedy continuations llama.cpp gives */
export const models: ReadonlyArray<{ readonly name: string; readonly options: Fixture.Options }> = [
  ...(["llama", "qwen2", "qwen3"] as const).flatMap((architecture) =>
    dtypes.map((dtype) => ({ name: `${architecture}-${dtype}`, options: { architecture, dtype, ...shape, seed: 3 } }))
  ),
  // a head tied to the embedding, and Llama 3's byte-level vocabulary
  {
    name: "qwen2-tied-q8_0",
    options: { architecture: "qwen2", dtype: "q8_0", ...shape, seed: 4, tiedEmbeddings: true }
  },
  { name: "llama3-q4_K", options: { architecture: "llama", dtype: "q4_K", ...shape, seed: 5, tokenizer: "gpt2" } }
]

/**
 * models naming how their embeddings pool (as embedding models do: Qwen3-Embedding names last), whose
 * pooled embedding of the prompt llama.cpp gives
 */
export const embeddings: ReadonlyArray<{ readonly name: string; readonly options: Fixture.Options }> = [
  { name: "qwen3-last-f32", options: { architecture: "qwen3", dtype: "f32", ...shape, seed: 6, pooling: "last" } },
  { name: "llama-mean-f16", options: { architecture: "llama", dtype: "f16", ...shape, seed: 7, pooling: "mean" } },
  { name: "qwen2-mean-q8_0", options: { architecture: "qwen2", dtype: "q8_0", ...shape, seed: 8, pooling: "mean" } }
]

/** the prompt's token ids, used as they are (BOS included) */
export const prompt = [1, 40, 271, 7, 120, 299, 33, 260, 64, 5, 181, 222, 90, 13, 250, 77]

/** tokens of greedy continuation compared */
export const continuation = 16

/** vocabularies whose tokenizers are compared: one of each kind, larger so that merges matter */
export const tokenizers: ReadonlyArray<{ readonly name: string; readonly options: Fixture.Options }> = [
  { name: "spm", architecture: "llama", tokenizer: "llama" },
  { name: "qwen2-bpe", architecture: "qwen2", tokenizer: "gpt2" },
  { name: "llama3-bpe", architecture: "llama", tokenizer: "gpt2" }
].map(({ architecture, name, tokenizer }) => ({
  name,
  options: {
    architecture: architecture as Fixture.Architecture,
    tokenizer: tokenizer as "llama" | "gpt2",
    dtype: "f32",
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    ffn: 32,
    vocab: 3000,
    seed: 5
  }
}))

/** strings the tokenizers split: words, unicode, whitespace runs, digits, contractions, special tokens */
export const strings: ReadonlyArray<string> = [
  "",
  " ",
  "  ",
  "hello world",
  " hello world",
  "Hello World",
  "the quick brown fox jumps over the lazy dog",
  "theta eta tao sin his",
  "a",
  "ee",
  "tea tee toe",
  "in the rain and the sun",
  "don't stop, it's fine; we'll see what you've done",
  "I'M SHOUTING, YOU'RE NOT",
  "numbers 1 12 123 1234 12345",
  "3.14159 and 2,718 and 1e-9",
  "year 2026 day 03",
  "tabs\tand\ttabs",
  "new\nline",
  "two\n\nnewlines",
  "crlf\r\nend",
  "trailing spaces   ",
  "   leading spaces",
  "a  b   c    d",
  "mixed \t \n whitespace",
  "punctuation!!! ??? ... ---",
  "(parens) [brackets] {braces} <angles>",
  "email@example.com https://example.com/path?q=1",
  "snake_case camelCase kebab-case",
  "café naïve résumé",
  "über straße größe",
  "日本語のテキスト",
  "中文文本测试",
  "한국어 텍스트",
  "Ελληνικά κείμενο",
  "русский текст",
  "עברית",
  "العربية",
  "emoji 😀 🎉 👍🏽",
  "family 👨‍👩‍👧",
  "math ∑ ∫ √ ∞ ≠",
  "currency € £ ¥ $",
  "zero\u200bwidth",
  "nbsp\u00a0space",
  "ideographic\u3000space",
  "combining e\u0301",
  "<s>",
  "</s>",
  "<s>hello</s>",
  "text <|tool|> call",
  "<|begin_of_text|>hi<|eot_id|>",
  "<|end_of_text|> after",
  "<unk> token",
  "tokens<|tool|><|tool|>twice",
  "x".repeat(40),
  "ab".repeat(20),
  "it is what it is, and that is that."
]

/** strings also split with special tokens read as such */
export const specialStrings = strings.filter((s) => s.includes("<"))
