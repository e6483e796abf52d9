/**
 * Small models of the llama family with random weights and a synthetic vocabulary, written as GGUF the
 * way llama.cpp's converter names and shapes them: the project's fixtures (no model can be downloaded),
 * and the benchmark models with real shapes (generated where they run). Seeded: the same options give
 * the same bytes.
 *
 * @since 0.1.0
 */
import * as DType from "@effect-gpu/core/DType"
import * as Float16 from "@effect-gpu/core/Float16"
import * as Quant from "@effect-gpu/core/Quant"
import * as Gguf from "./Gguf.js"
import { mulberry32 } from "./internal/random.js"
import * as Tokenizer from "./Tokenizer.js"

/**
 * @since 0.1.0
 * @category models
 */
export type Architecture = "llama" | "qwen2" | "qwen3"

/**
 * The model to make. Matrices take `dtype` (their rows must be whole blocks of it); norms, biases and
 * 1-D tensors are f32, as llama.cpp writes them.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly architecture: Architecture
  readonly dtype: DType.DType
  readonly hidden: number
  readonly layers: number
  readonly heads: number
  readonly kvHeads: number
  readonly ffn: number
  /** tokens of the synthetic vocabulary, special and byte tokens included (at least 259 for llama's) */
  readonly vocab: number
  readonly contextLength?: number
  /** the output head shares the embedding (no output.weight) */
  readonly tiedEmbeddings?: boolean
  readonly seed?: number
  readonly ropeFreqBase?: number
  readonly rmsEps?: number
  /** the vocabulary's kind: SentencePiece for llama, byte-level BPE for qwen (and for Llama 3: `gpt2`) */
  readonly tokenizer?: "llama" | "gpt2"
  /**
   * matrices of another type than `dtype`, by name without the layer and `.weight` (`attn_v`, `ffn_down`,
   * `output`, `token_embd`, ...): a mix as quantizers make them (llama.cpp's Q4_K_M keeps some in q6_K)
   */
  readonly types?: { readonly [matrix: string]: DType.DType }
  /** `tokenizer.chat_template` (a Jinja template, as real models ship it); default: none */
  readonly chatTemplate?: string
  /** `{arch}.pooling_type` as an embedding model names it (mean 1, last 3); default: none */
  readonly pooling?: "mean" | "last"
}

/** values of `dtype` as bytes (ggml's layout) */
const encode = (dtype: DType.DType, values: Float32Array): Uint8Array => {
  if (dtype === "f32") return new Uint8Array(values.buffer.slice(0))
  if (dtype === "f16") return new Uint8Array(Float16.encodeArray(values).buffer)
  if (DType.isQuantized(dtype)) return Quant.unsafeQuantize(dtype, values)
  throw new Error(`fixtures take f32, f16 or a quantized type, not ${dtype}`)
}

/**
 * The synthetic vocabulary, grown as real ones are: each new piece joins two pieces already there, so that
 * merges reach it. For `llama` (SentencePiece) <unk>, <s>, </s>, the 256 byte tokens, then pieces scored
 * by age (older pieces merge first); for `gpt2` (byte-level BPE) the 256 byte characters, the pieces and
 * the merges that make them in rank order, then special tokens. Both end with a user-defined token.
 *
 * @since 0.1.0
 * @category vocabulary
 */
export const vocabulary = (model: "llama" | "gpt2", size: number, seed = 7) => {
  const rand = mulberry32(seed)
  const pick = <A>(xs: ReadonlyArray<A>) => xs[Math.floor(rand() * xs.length)]
  const space = model === "llama" ? "\u2581" : "\u0120"
  const letters = [..."etaoinshrdlucmfwypvbgkqjxz"]
  // frequent letters first, as a corpus would rank them; accented letters and digits come as bytes
  const starts = [...letters.map((l) => space + l), ...".,!?'".split("").map((c) => space + c)]
  const special = model === "llama"
    ? ["<unk>", "<s>", "</s>"]
    : ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
  const userDefined = "<|tool|>"
  const fixed = model === "llama" ? special.length + 256 + 1 : 256 + special.length + 1
  const rest = size - fixed
  if (rest < letters.length + 1) {
    throw new Error(`a ${model} vocabulary needs at least ${fixed + letters.length + 1} tokens, not ${size}`)
  }
  const pieces: Array<string> = [...letters]
  const tails: Array<string> = [...letters]
  const merges: Array<string> = []
  const seen = new Set(pieces)
  const join = (a: string, b: string) => {
    const p = a + b
    if (seen.has(p) || p.length > 8) return
    seen.add(p)
    pieces.push(p)
    if (!p.startsWith(space)) tails.push(p)
    merges.push(`${a} ${b}`)
  }
  // BPE's letters are byte tokens already: it grows that many more pieces
  const wanted = model === "llama" ? rest : rest + letters.length
  // the space before a letter first, then words grown a piece at a time
  for (const s of starts) if (pieces.length < wanted) join(s.slice(0, 1), s.slice(1))
  while (pieces.length < wanted) join(pick(pieces), pick(tails))
  if (model === "llama") {
    const bytes = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`)
    // SentencePiece has the space and the letters as pieces of their own
    const spmPieces = [space, ...pieces.filter((p) => p !== space)].slice(0, rest)
    const tokens = [...special, ...bytes, ...spmPieces, userDefined]
    // token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
    const types = tokens.map((_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : i === tokens.length - 1 ? 4 : 1))
    const scores = tokens.map((_, i) => (i < 259 || i === tokens.length - 1 ? 0 : -(i - 259)))
    return { model, tokens, types, scores, merges: [] as Array<string>, bos: 1, eos: 2 }
  }
  const byteChars = Tokenizer.byteCharacters
  const bpePieces = pieces.filter((p) => [...p].length >= 2 && !byteChars.includes(p))
  const tokens = [...byteChars, ...bpePieces.slice(0, rest), ...special, userDefined]
  const kept = new Set(tokens)
  const types = tokens.map((t, i) => (i < 256 + Math.min(rest, bpePieces.length) ? 1 : t === userDefined ? 4 : 3))
  return {
    model,
    tokens,
    types,
    scores: [] as Array<number>,
    merges: merges.filter((m) => kept.has(m.replace(" ", ""))),
    bos: tokens.indexOf(special[0]),
    eos: tokens.indexOf(special[1])
  }
}

/**
 * The small model the examples run without a file: qwen3 in q6_K, 2 layers of 256, a 300-token
 * vocabulary. The package's tests hold llama.cpp's answers for it (fixture qwen3-q6_K).
 *
 * @since 0.1.0
 * @category models
 */
export const demo: Options = {
  architecture: "qwen3",
  dtype: "q6_K",
  hidden: 256,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  ffn: 512,
  vocab: 300,
  contextLength: 256,
  seed: 3
}

/** `n` values drawn in turn (a loop: Float32Array.from's mapping ran several times slower) */
const drawn = (n: number, draw: () => number): Float32Array => {
  const values = new Float32Array(n)
  for (let i = 0; i < n; i++) values[i] = draw()
  return values
}

/** the most bytes of a tiled tensor handed to the sink at once: its pool repeated (fewer, larger writes) */
const CHUNK_BYTES = 8 << 20

/** `pool` repeated whole as many times as fit in `bytes` (once at least) */
const repeated = (pool: Uint8Array, bytes: number): Uint8Array => {
  const times = Math.max(1, Math.floor(bytes / pool.byteLength))
  if (times === 1) return pool
  const out = new Uint8Array(times * pool.byteLength)
  for (let k = 0; k < times; k++) out.set(pool, k * pool.byteLength)
  return out
}

/** a tensor to write: `pool` is its bytes, or (tiled) whole rows of them repeated up to `nbytes` */
interface Planned {
  readonly name: string
  readonly dtype: DType.DType
  readonly ne: Array<number>
  readonly nbytes: number
  readonly pool: () => Uint8Array
}

/**
 * How a model is written: `tile`, if set, caps the random values drawn per tensor (whole rows, repeated
 * to fill it), so that models with real shapes are written in seconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface WriteOptions {
  readonly tile?: number
}

const plan = (options: Options, writeOptions: WriteOptions = {}) => {
  const { architecture: arch, dtype, ffn, heads, hidden, kvHeads, layers } = options
  const rand = mulberry32(options.seed ?? 1)
  const headDim = hidden / heads
  if (!Number.isInteger(headDim) || heads % kvHeads !== 0) {
    throw new Error(`${heads} heads must divide the hidden size ${hidden}, and ${kvHeads} KV heads the heads`)
  }
  const tokenizer = options.tokenizer ?? (arch === "llama" ? "llama" : "gpt2")
  const vocab = vocabulary(tokenizer, options.vocab, (options.seed ?? 1) + 1)
  const tensors: Array<Planned> = []
  const rowBytes = (type: DType.DType, n: number) => (n / DType.blockSize(type)) * DType.typeSize(type)
  // weights of a few hundredths keep activations near 1 through the layers
  const matrix = (name: string, ne: Array<number>, scale = 1 / Math.sqrt(ne[0])) => {
    const type = options.types?.[name.replace(/^blk\.\d+\./, "").replace(/\.weight$/, "")] ?? dtype
    const rows = writeOptions.tile === undefined
      ? ne[1]
      : Math.min(ne[1], Math.max(1, Math.floor(writeOptions.tile / ne[0])))
    tensors.push({
      name,
      dtype: type,
      ne,
      nbytes: rowBytes(type, ne[0]) * ne[1],
      pool: () => encode(type, drawn(ne[0] * rows, () => (rand() * 2 - 1) * scale))
    })
  }
  const vector = (name: string, n: number, around: number, spread: number) => {
    tensors.push({
      name,
      dtype: "f32",
      ne: [n],
      nbytes: 4 * n,
      pool: () => encode("f32", drawn(n, () => around + (rand() * 2 - 1) * spread))
    })
  }
  // a tied head reads the embedding as its weights: at unit scale each token would predict itself
  matrix(
    "token_embd.weight",
    [hidden, vocab.tokens.length],
    options.tiedEmbeddings === true ? 1 / Math.sqrt(hidden) : 1
  )
  for (let i = 0; i < layers; i++) {
    const b = `blk.${i}`
    vector(`${b}.attn_norm.weight`, hidden, 1, 0.1)
    matrix(`${b}.attn_q.weight`, [hidden, heads * headDim])
    matrix(`${b}.attn_k.weight`, [hidden, kvHeads * headDim])
    matrix(`${b}.attn_v.weight`, [hidden, kvHeads * headDim])
    if (arch === "qwen2") {
      vector(`${b}.attn_q.bias`, heads * headDim, 0, 0.1)
      vector(`${b}.attn_k.bias`, kvHeads * headDim, 0, 0.1)
      vector(`${b}.attn_v.bias`, kvHeads * headDim, 0, 0.1)
    }
    if (arch === "qwen3") {
      vector(`${b}.attn_q_norm.weight`, headDim, 1, 0.1)
      vector(`${b}.attn_k_norm.weight`, headDim, 1, 0.1)
    }
    matrix(`${b}.attn_output.weight`, [heads * headDim, hidden])
    vector(`${b}.ffn_norm.weight`, hidden, 1, 0.1)
    matrix(`${b}.ffn_gate.weight`, [hidden, ffn])
    matrix(`${b}.ffn_up.weight`, [hidden, ffn])
    matrix(`${b}.ffn_down.weight`, [ffn, hidden])
  }
  vector("output_norm.weight", hidden, 1, 0.1)
  if (options.tiedEmbeddings !== true) matrix("output.weight", [hidden, vocab.tokens.length])

  const u32 = (value: number): Gguf.Value => ({ type: "u32", value })
  const f32 = (value: number): Gguf.Value => ({ type: "f32", value: Math.fround(value) })
  const metadata: Array<readonly [string, Gguf.Value]> = [
    ["general.architecture", { type: "string", value: arch }],
    ["general.name", { type: "string", value: `effect-gpu fixture ${arch} ${dtype}` }],
    [`${arch}.context_length`, u32(options.contextLength ?? 2048)],
    [`${arch}.embedding_length`, u32(hidden)],
    [`${arch}.block_count`, u32(layers)],
    [`${arch}.feed_forward_length`, u32(ffn)],
    [`${arch}.attention.head_count`, u32(heads)],
    [`${arch}.attention.head_count_kv`, u32(kvHeads)],
    [`${arch}.attention.layer_norm_rms_epsilon`, f32(options.rmsEps ?? 1e-5)],
    [`${arch}.rope.freq_base`, f32(options.ropeFreqBase ?? 10000)],
    [`${arch}.rope.dimension_count`, u32(headDim)],
    [`${arch}.vocab_size`, u32(vocab.tokens.length)],
    ["tokenizer.ggml.model", { type: "string", value: vocab.model }],
    ...(vocab.model === "gpt2"
      ? [["tokenizer.ggml.pre", { type: "string", value: arch === "llama" ? "llama-bpe" : "qwen2" }] as const]
      : []),
    ["tokenizer.ggml.tokens", { type: "array", itemType: "string", value: vocab.tokens }],
    ["tokenizer.ggml.token_type", { type: "array", itemType: "i32", value: vocab.types }],
    ...(vocab.model === "llama"
      ? [["tokenizer.ggml.scores", { type: "array", itemType: "f32", value: vocab.scores }] as const]
      : [["tokenizer.ggml.merges", { type: "array", itemType: "string", value: vocab.merges }] as const]),
    ["tokenizer.ggml.bos_token_id", u32(vocab.bos)],
    ["tokenizer.ggml.eos_token_id", u32(vocab.eos)],
    ...(options.pooling !== undefined
      ? [[`${arch}.pooling_type`, u32(options.pooling === "mean" ? 1 : 3)] as const]
      : []),
    ...(options.chatTemplate !== undefined
      ? [["tokenizer.chat_template", { type: "string", value: options.chatTemplate }] as const]
      : [])
  ]
  return { metadata, tensors }
}

/**
 * A model as GGUF bytes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Uint8Array => {
  const { metadata, tensors } = plan(options)
  // pools drawn in order: the seeded values are the same whichever way the model is written
  return Gguf.write({ metadata, tensors: tensors.map((t) => ({ ...t, data: t.pool() })) })
}

/**
 * Writes a model a piece at a time to `sink` (a file too large for memory): the header, then each
 * tensor, its pool repeated where `tile` is set.
 *
 * @since 0.1.0
 * @category constructors
 */
export const write = (options: Options, sink: (bytes: Uint8Array) => void, writeOptions: WriteOptions = {}): number => {
  const { metadata, tensors } = plan(options, writeOptions)
  const head = Gguf.header({ metadata, tensors })
  sink(head)
  let written = head.byteLength
  for (const t of tensors) {
    const chunk = repeated(t.pool(), Math.min(t.nbytes, CHUNK_BYTES))
    for (let at = 0; at < t.nbytes; at += chunk.byteLength) {
      const piece = chunk.subarray(0, Math.min(chunk.byteLength, t.nbytes - at))
      sink(piece)
      written += piece.byteLength
    }
    const pad = Gguf.padding(t.nbytes)
    if (pad.byteLength > 0) sink(pad)
    written += pad.byteLength
  }
  return written
}
