/**
 * Text to tokens and back, from a model's GGUF vocabulary, as llama.cpp does it: SentencePiece-style
 * merges by score (`tokenizer.ggml.model = llama`, with byte fallback and the space prefix) and GPT-2
 * byte-level BPE by merge rank (`gpt2`, as Llama 3 and Qwen ship it, split first by the pre-tokenizer's
 * pattern). Special tokens are split out of the text before either; BOS and EOS follow the metadata.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Gguf from "./Gguf.js"
import { heap } from "./internal/heap.js"
import { ModelError } from "./ModelError.js"

/**
 * GGUF's token types.
 *
 * @since 0.1.0
 * @category models
 */
export const TokenType = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const

/**
 * @since 0.1.0
 * @category models
 */
export interface TokenizeOptions {
  /** add BOS (and EOS) where the model asks for them (default true) */
  readonly addSpecial?: boolean
  /** read special tokens' text (`<s>`, `<|im_end|>`) as those tokens (default false: as plain text) */
  readonly parseSpecial?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Tokenizer {
  readonly model: "llama" | "gpt2"
  /** tokens in the vocabulary */
  readonly size: number
  readonly bos: number | undefined
  readonly eos: number | undefined
  readonly addBos: boolean
  /** SentencePiece's space before the text */
  readonly addSpacePrefix: boolean
  /** tokens that end a generation: EOS, end of turn, end of message */
  readonly endOfGeneration: ReadonlySet<number>
  readonly tokenize: (text: string, options?: TokenizeOptions) => Array<number>
  /** a token's bytes (control tokens give none unless `special`) */
  readonly piece: (token: number, special?: boolean) => Uint8Array
  /** tokens' text (SentencePiece's leading space dropped) */
  readonly detokenize: (tokens: ReadonlyArray<number>, special?: boolean) => string
}

/**
 * GPT-2's byte characters: printable bytes stand for themselves, the others are shifted past 255 so that
 * every byte has a visible character.
 *
 * @since 0.1.0
 * @category vocabulary
 */
export const byteCharacters: ReadonlyArray<string> = (() => {
  const chars: Array<string> = []
  let shift = 0
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)
    chars.push(String.fromCharCode(printable ? b : 256 + shift++))
  }
  return chars
})()

const charToByte = new Map(byteCharacters.map((c, b) => [c, b]))
const utf8 = new TextEncoder()

// Unicode's White_Space (JavaScript's \s differs: it has U+FEFF and lacks U+0085)
const WS = "\\t\\n\\v\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000"
const CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
const qwenLike = (digits: string) =>
  `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}${digits}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|[${WS}]*[\\r\\n]+|[${WS}]+(?![^${WS}])|[${WS}]+`
const GPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])`

/** llama.cpp's pre-tokenizers by `tokenizer.ggml.pre`: the patterns applied in turn, and its flags */
const PRE_TOKENIZERS: Record<
  string,
  { readonly patterns: ReadonlyArray<string>; readonly llama3?: boolean; readonly cleanSpaces: boolean }
> = {
  default: { patterns: ["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"], cleanSpaces: true },
  "gpt-2": { patterns: [GPT2], cleanSpaces: true },
  qwen2: { patterns: [qwenLike("")], cleanSpaces: false },
  llama3: { patterns: [qwenLike("{1,3}")], llama3: true, cleanSpaces: true }
}

/** the tokenizer's clean-up of detokenized text: no space before ?!., nor around a lone ', nor before 's 'm 're 've */
const cleanSpaces = (text: string) =>
  text.replace(/ ([?!.,])/g, "$1").replace(/ ' /g, "'").replace(/ '(?=[sm]|re|ve)/g, "'")
const PRE_ALIASES: Record<string, string> = { "llama-bpe": "llama3", "llama-v3": "llama3", "deepseek-r1-qwen": "qwen2" }

/** pieces of `text` as the patterns split it: matches and the text between them, in order */
const split = (text: string, patterns: ReadonlyArray<RegExp>): Array<string> => {
  let pieces = [text]
  for (const pattern of patterns) {
    const next: Array<string> = []
    for (const piece of pieces) {
      let at = 0
      for (const m of piece.matchAll(pattern)) {
        if (m.index > at) next.push(piece.slice(at, m.index))
        if (m[0].length > 0) next.push(m[0])
        at = m.index + m[0].length
      }
      if (at < piece.length) next.push(piece.slice(at))
    }
    pieces = next
  }
  return pieces
}

interface Symbol {
  text: string
  prev: number
  next: number
}

interface Bigram {
  readonly left: number
  readonly right: number
  readonly text: string
  /** larger first (SentencePiece's score) */
  readonly score: number
}

/**
 * Merges adjacent symbols of `chars`, best bigram first (ties: leftmost), for as long as `rate` accepts
 * a pair; the merged symbols in order.
 */
const merge = (chars: ReadonlyArray<string>, rate: (left: string, right: string) => number | undefined) => {
  const symbols: Array<Symbol> = chars.map((text, i) => ({
    text,
    prev: i - 1,
    next: i + 1 < chars.length ? i + 1 : -1
  }))
  const queue = heap<Bigram>((a, b) => a.score > b.score || (a.score === b.score && a.left < b.left))
  const add = (left: number, right: number) => {
    if (left < 0 || right < 0) return
    const score = rate(symbols[left].text, symbols[right].text)
    if (score !== undefined) queue.push({ left, right, text: symbols[left].text + symbols[right].text, score })
  }
  for (let i = 1; i < symbols.length; i++) add(i - 1, i)
  while (queue.size > 0) {
    const bigram = queue.pop()
    const left = symbols[bigram.left]
    const right = symbols[bigram.right]
    // a pair one of whose symbols has changed since it was queued is stale
    if (left.text.length === 0 || right.text.length === 0 || left.text + right.text !== bigram.text) continue
    left.text = bigram.text
    right.text = ""
    left.next = right.next
    if (right.next >= 0) symbols[right.next].prev = bigram.left
    add(left.prev, bigram.left)
    add(bigram.left, left.next)
  }
  return symbols.filter((s) => s.text.length > 0).map((s) => s.text)
}

const hex = (b: number) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`

/**
 * The tokenizer of `gguf` (`file` names it in failures): a vocabulary of another kind, a pre-tokenizer
 * this reader does not know, or metadata of the wrong type fail with ModelError.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromGguf = (gguf: Gguf.GgufFile, file = "<bytes>"): Effect.Effect<Tokenizer, ModelError> =>
  Effect.try({
    try: () => make(gguf, file),
    catch: (e) => e instanceof ModelError ? e : new ModelError({ file, problem: String(e) })
  })

const make = (gguf: Gguf.GgufFile, file: string): Tokenizer => {
  const fail = (problem: string) => new ModelError({ file, problem })
  const meta = (key: string) => gguf.metadata.get(`tokenizer.ggml.${key}`)
  const strings = (key: string): ReadonlyArray<string> | undefined => {
    const v = meta(key)
    if (v === undefined) return undefined
    if (v.type !== "array" || v.itemType !== "string") throw fail(`tokenizer.ggml.${key} must be an array of strings`)
    return v.value as ReadonlyArray<string>
  }
  const numbers = (key: string): ReadonlyArray<number> | undefined => {
    const v = meta(key)
    if (v === undefined) return undefined
    if (v.type !== "array" || typeof v.value[0] === "string") {
      throw fail(`tokenizer.ggml.${key} must be an array of numbers`)
    }
    return v.value.map(Number)
  }
  const flag = (key: string, fallback: boolean) => {
    const v = meta(key)
    if (v === undefined) return fallback
    if (v.type !== "bool") throw fail(`tokenizer.ggml.${key} must be a bool`)
    return v.value
  }
  const model = meta("model")
  if (model === undefined || model.type !== "string") throw fail("tokenizer.ggml.model is missing")
  if (model.value !== "llama" && model.value !== "gpt2") {
    throw fail(`tokenizer ${model.value} is not supported (llama's SentencePiece or gpt2's BPE)`)
  }
  const spm = model.value === "llama"
  const texts = strings("tokens")
  if (texts === undefined || texts.length === 0) throw fail("tokenizer.ggml.tokens is missing")
  const types = numbers("token_type") ?? texts.map(() => TokenType.normal)
  const scores = numbers("scores") ?? texts.map(() => 0)
  const ids = new Map<string, number>()
  texts.forEach((t, i) => ids.set(t, i))
  const id = (key: string, fallback: number | undefined) => {
    const v = meta(key)
    const n = v === undefined ? fallback : Number(v.value)
    return n !== undefined && n >= 0 && n < texts.length ? n : undefined
  }
  const bos = id("bos_token_id", spm ? 1 : undefined)
  const eos = id("eos_token_id", spm ? 2 : undefined)

  let pre: (typeof PRE_TOKENIZERS)[string] = PRE_TOKENIZERS.default
  const ranks = new Map<string, number>()
  if (!spm) {
    const preValue = meta("pre")
    const preName = preValue?.type === "string" ? preValue.value : "default"
    const found = PRE_TOKENIZERS[PRE_ALIASES[preName] ?? preName]
    if (found === undefined) throw fail(`pre-tokenizer ${preName} is not supported`)
    pre = found
    const merges = strings("merges")
    if (merges === undefined) throw fail("tokenizer.ggml.merges is missing")
    merges.forEach((m, rank) => {
      const at = m.indexOf(" ", 1)
      if (at > 0) ranks.set(`${m.slice(0, at)}\u0001${m.slice(at + 1)}`, rank)
    })
  }
  const patterns = pre.patterns.map((p) => new RegExp(p, "gu"))
  const addBos = flag("add_bos_token", spm || pre.llama3 === true)
  const addEos = flag("add_eos_token", false)
  const addSpacePrefix = spm && flag("add_space_prefix", true)

  const special = texts
    .map((_, i) => i)
    .filter((i) => [TokenType.control, TokenType.userDefined, TokenType.unknown].includes(types[i] as 2 | 3 | 4))
    .sort((a, b) => utf8.encode(texts[b]).length - utf8.encode(texts[a]).length)
  const endTexts = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>"]
  const endOfGeneration = new Set(
    [eos, id("eot_token_id", undefined), id("eom_token_id", undefined), ...endTexts.map((t) => ids.get(t))].filter(
      (t): t is number => t !== undefined
    )
  )

  /** the text split around special tokens (longest first): strings and token ids in order */
  const partition = (text: string, parseSpecial: boolean): Array<string | number> => {
    let fragments: Array<string | number> = text.length > 0 ? [text] : []
    for (const token of special) {
      if (!parseSpecial && types[token] !== TokenType.userDefined) continue
      const needle = texts[token]
      fragments = fragments.flatMap((f) => {
        if (typeof f === "number") return [f]
        const out: Array<string | number> = []
        let at = 0
        for (let found = f.indexOf(needle); found >= 0; found = f.indexOf(needle, at)) {
          if (found > at) out.push(f.slice(at, found))
          out.push(token)
          at = found + needle.length
        }
        if (at < f.length) out.push(f.slice(at))
        return out
      })
    }
    return fragments
  }

  const spmTokens = (text: string, out: Array<number>) => {
    const merged = merge([...text.replaceAll(" ", "\u2581")], (l, r) => {
      const t = ids.get(l + r)
      return t === undefined ? undefined : scores[t]
    })
    for (const s of merged) {
      const t = ids.get(s)
      if (t !== undefined) out.push(t)
      else for (const b of utf8.encode(s)) out.push(ids.get(hex(b)) ?? ids.get(String.fromCharCode(b)) ?? 0)
    }
  }

  const bpeTokens = (text: string, out: Array<number>) => {
    for (const word of split(text, patterns)) {
      const encoded = Array.from(utf8.encode(word), (b) => byteCharacters[b])
      const whole = encoded.join("")
      const direct = pre.llama3 === true ? ids.get(whole) : undefined
      const symbols = direct !== undefined ? [whole] : merge(encoded, (l, r) => {
        const rank = ranks.get(`${l}\u0001${r}`)
        return rank === undefined ? undefined : -rank
      })
      for (const s of symbols) {
        const t = ids.get(s)
        if (t !== undefined) out.push(t)
        else for (const c of s) if (ids.has(c)) out.push(ids.get(c)!)
      }
    }
  }

  const tokenize = (text: string, options: TokenizeOptions = {}) => {
    const addSpecial = options.addSpecial ?? true
    const out: Array<number> = []
    if (addSpecial && addBos && bos !== undefined) out.push(bos)
    let previousSpecial = true
    for (const fragment of partition(text, options.parseSpecial === true)) {
      if (typeof fragment === "number") {
        out.push(fragment)
        previousSpecial = true
      } else if (spm) {
        spmTokens(addSpacePrefix && previousSpecial ? ` ${fragment}` : fragment, out)
        previousSpecial = false
      } else {
        bpeTokens(fragment, out)
      }
    }
    if (addSpecial && addEos && eos !== undefined) out.push(eos)
    return out
  }

  const piece = (token: number, showSpecial = false): Uint8Array => {
    const type = types[token]
    const text = texts[token]
    if (text === undefined) return new Uint8Array(0)
    if (type === TokenType.control || type === TokenType.unknown) {
      return showSpecial ? utf8.encode(text) : new Uint8Array(0)
    }
    if (type === TokenType.userDefined) return utf8.encode(text)
    if (type === TokenType.byte) return Uint8Array.of(parseInt(text.slice(3, 5), 16))
    if (type !== TokenType.normal) return new Uint8Array(0)
    if (spm) return utf8.encode(text.replaceAll("\u2581", " "))
    const bytes: Array<number> = []
    for (const c of text) {
      const b = charToByte.get(c)
      if (b !== undefined) bytes.push(b)
      else bytes.push(...utf8.encode(c))
    }
    return Uint8Array.from(bytes)
  }

  const detokenize = (tokens: ReadonlyArray<number>, showSpecial = false) => {
    const decoder = decoderOf(piece, showSpecial, addSpacePrefix)
    const text = tokens.map((t) => decoder.push(t)).join("") + decoder.flush()
    return !spm && pre.cleanSpaces ? cleanSpaces(text) : text
  }

  return {
    model: model.value,
    size: texts.length,
    bos,
    eos,
    addBos,
    addSpacePrefix,
    endOfGeneration,
    tokenize,
    piece,
    detokenize
  }
}

/**
 * Text as tokens come: each token's bytes are added, and what forms whole UTF-8 characters is returned;
 * a character cut between tokens waits for its rest.
 *
 * @since 0.1.0
 * @category models
 */
export interface Decoder {
  readonly push: (token: number) => string
  /** what is held back (an incomplete character comes out as U+FFFD) */
  readonly flush: () => string
}

const decoderOf = (piece: Tokenizer["piece"], special: boolean, stripFirstSpace: boolean): Decoder => {
  const text = new TextDecoder("utf-8")
  let first = stripFirstSpace
  return {
    push: (token) => {
      let bytes = piece(token, special)
      // SentencePiece's prefix space: llama.cpp drops it from the first token only
      if (first) {
        if (bytes[0] === 0x20) bytes = bytes.subarray(1)
        first = false
      }
      return text.decode(bytes, { stream: true })
    },
    flush: () => text.decode()
  }
}

/**
 * A streaming decoder for `tokenizer`'s tokens that continue a text (a generation after its prompt);
 * `special` shows control tokens' text.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decoder = (tokenizer: Tokenizer, options: { readonly special?: boolean } = {}): Decoder =>
  decoderOf(tokenizer.piece, options.special === true, false)
