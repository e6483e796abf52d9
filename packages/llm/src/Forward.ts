/**
 * The forward graph of a llama-family model over a run of tokens, built with Ops as llama.cpp builds it:
 * embedding rows, then per layer rms_norm, q/k/v projections (qwen2's biases, qwen3's q/k norms), rope,
 * fused attention under a causal mask with grouped KV heads, the output projection and a residual, then
 * rms_norm and the swiglu feed-forward with a residual; the output norm and head give the logits. Where
 * only the last token's logits are wanted, the last layer past its attention (output projection, residual,
 * feed-forward) and the head take that token's row alone, as llama.cpp's graphs do. Without a cache it runs
 * a whole sequence from position 0; with one (KvCache) it runs a batch at any position, storing the batch's
 * keys and values with set_rows and attending over the cache's first positions.
 *
 * @since 0.1.0
 */
import type { ShapeError } from "@effect-gpu/core/GpuError"
import * as Graph from "@effect-gpu/core/Graph"
import * as Ops from "@effect-gpu/core/Ops"
import * as Tensor from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type { Hyperparameters } from "./Hyperparameters.js"
import * as KvCache from "./KvCache.js"
import { ModelError } from "./ModelError.js"
import type { Weights } from "./Weights.js"

/**
 * The graph and the inputs to set before computing it: the token ids (i32), their positions (i32, also
 * the cache rows they are stored in) and the causal mask (f16, 0 or -inf, [keys, tokens]); `logits` is
 * [vocab, tokens], or [vocab, 1] for the last token only.
 *
 * @since 0.1.0
 * @category models
 */
export interface Forward {
  readonly graph: Graph.Builder
  readonly tokens: Tensor.Tensor
  readonly positions: Tensor.Tensor
  readonly mask: Tensor.Tensor
  /** (left out of the graph with `Options.embeddings`) */
  readonly logits: Tensor.Tensor
  /** with `Options.embeddings`: every token's hidden state after the output norm, [hidden, tokens] */
  readonly embeddings: Tensor.Tensor | undefined
  /** with `Options.argmax`: the last token's likeliest next token, i32 [1] (the argmax of its logits) */
  readonly next: Tensor.Tensor | undefined
  /**
   * the positions of this graph's tokens from position `start`, and the mask's bytes in its type (set with
   * `plan.setBytes`)
   */
  readonly inputs: (start: number) => { readonly positions: Int32Array; readonly mask: Uint8Array }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** names the model in failures */
  readonly file?: string
  /** store keys and values in this cache and attend over its first `keys` positions */
  readonly cache?: { readonly cache: KvCache.KvCache; readonly keys: number }
  /** the logits of every token, not only of the last (default false) */
  readonly allLogits?: boolean
  /**
   * every token's hidden state after the output norm (what the head multiplies: llama.cpp's embeddings)
   * as the graph's output, in place of the logits (default false)
   */
  readonly embeddings?: boolean
  /**
   * also the argmax of the last token's logits (`next`): greedy decoding reads 4 bytes a token instead of
   * a vocabulary of logits (default false)
   */
  readonly argmax?: boolean
  /**
   * attention as one flash_attn_ext, or as the chain llama.cpp runs without flash attention (K·Q,
   * soft_max, V·P); `auto` (the default) takes the chain for batches of 64 tokens or more over a cache,
   * where it runs faster on a GPU without the one-pass kernel (benchmarks/RESULTS.md, choices: attention)
   */
  readonly attention?: "fused" | "chain" | "auto"
  /**
   * q, k and v as one product over their stacked weights (`Weights.stacks`; its result's rows viewed as
   * the three), and the gate and up products as one (their halves the swiglu's two sources), or each
   * product apart; `auto` (the default) stacks batches of more than 8 tokens. Either way only where the
   * weights have a stack (a layer whose weights do not lie back to back keeps its products apart); a
   * decoding step's products stay apart under `auto`: a backend may fuse them itself, as the WebGPU
   * backend's fusions do (its int8 stack, and gate and up with their swiglu)
   */
  readonly projections?: "stacked" | "apart" | "auto"
}

/** the batch from which `auto` attention takes the chain */
const CHAIN_FROM = 64

/** the batch from which `auto` projections take the stack: past the 8 columns of matrix-vector kernels */
const STACK_FROM = 9

/**
 * The causal mask of `n` tokens from position `start` over `keys` cached positions: [keys, n], a key is
 * seen by the tokens at or after its position.
 *
 * @since 0.1.0
 * @category constructors
 */
export const causalMask = (n: number, start: number, keys: number): Float32Array => {
  const mask = new Float32Array(n * keys).fill(-Infinity)
  for (let i = 0; i < n; i++) mask.fill(0, i * keys, i * keys + Math.min(keys, start + i + 1))
  return mask
}

/**
 * The causal mask's bytes in the mask tensor's type (f16: -inf is 0xfc00), built without a conversion: a
 * prompt's mask converted value by value to f16 cost many times the host time of writing its bits.
 *
 * @since 0.1.0
 * @category constructors
 */
export const causalMaskBytes = (n: number, start: number, keys: number, dtype: "f16" | "f32"): Uint8Array => {
  if (dtype === "f32") {
    const mask = causalMask(n, start, keys)
    return new Uint8Array(mask.buffer, mask.byteOffset, mask.byteLength)
  }
  const bits = new Uint16Array(n * keys).fill(0xfc00)
  for (let i = 0; i < n; i++) bits.fill(0, i * keys, i * keys + Math.min(keys, start + i + 1))
  return new Uint8Array(bits.buffer, bits.byteOffset, bits.byteLength)
}

/**
 * Attention without fusion, as llama.cpp builds it with flash attention off: scores K·Q per head (a KV
 * head serves its group by broadcast), soft_max with the mask and scale, then V·P; q, k and v as
 * flash_attn_ext takes them, the result as it gives it ([D, heads, tokens]).
 */
const attentionChain = (
  q: Tensor.TensorLike,
  k: Tensor.TensorLike,
  v: Tensor.TensorLike,
  mask: Tensor.Tensor,
  scale: number
) =>
  Effect.gen(function*() {
    const scores = yield* Ops.softMax(Ops.mulMat(k, q), { mask, scale }) // [keys, tokens, heads]
    const vt = yield* Ops.cont(Ops.permute(v, [1, 0, 2, 3])) // [keys, D, kvHeads]: V's rows along the keys
    return yield* Ops.cont(Ops.permute(Ops.mulMat(vt, scores), [0, 2, 1, 3]))
  })

/**
 * Builds the forward graph for `n` tokens.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  h: Hyperparameters,
  weights: Weights,
  n: number,
  options: Options = {}
): Effect.Effect<Forward, ModelError | ShapeError> =>
  Effect.gen(function*() {
    const file = options.file ?? "<model>"
    const cache = options.cache
    const keys = cache?.keys ?? n
    if (cache !== undefined && (keys > cache.cache.size || keys < n)) {
      return yield* new ModelError({
        file,
        problem: `a batch of ${n} over ${keys} cached positions does not fit a cache of ${cache.cache.size}`
      })
    }
    const tensor = (name: string): Effect.Effect<Tensor.Tensor, ModelError> => {
      const t = weights.tensors.get(name)
      return t === undefined
        ? Effect.fail(new ModelError({ file, problem: `tensor ${name} is missing` }))
        : Effect.succeed(t)
    }
    const optional = (name: string) => weights.tensors.get(name)
    const kvRow = h.headDim * h.kvHeads
    const attention = options.attention ?? "auto"
    const projections = options.projections ?? "auto"
    const chain = cache !== undefined && (attention === "chain" || (attention === "auto" && n >= CHAIN_FROM))
    const g = Graph.make()
    const tokens = yield* g.input("tokens", "i32", [n])
    const positions = yield* g.input("positions", "i32", [n])
    // f32 beside an f32 cache: a device without f16 (a browser without shader-f16) takes neither as f16
    const mask = yield* g.input("mask", cache?.cache.dtype === "f32" ? "f32" : "f16", [keys, n])
    const norm = (x: Tensor.TensorLike, weight: Tensor.Tensor) => Ops.mul(Ops.rmsNorm(x, h.rmsEps), weight)
    const rope = (x: Tensor.TensorLike) =>
      Ops.rope(x, positions, { nDims: h.ropeDims, mode: h.ropeNeox ? 2 : 0, freqBase: h.ropeFreqBase })
    let x: Tensor.Tensor = yield* Ops.getRows(yield* tensor("token_embd.weight"), tokens)
    // only the rows whose logits are wanted go through the head, and through the last layer past its
    // attention (its keys and values are every token's; as llama.cpp builds it): the last token's alone
    const lastOnly = options.allLogits !== true && options.embeddings !== true && n > 1
    const lastColumn = (t: Tensor.Tensor) => Ops.view(t, [t.ne[0], 1], [t.nb[1]], (n - 1) * t.nb[1])
    for (let l = 0; l < h.layers; l++) {
      const b = `blk.${l}`
      const xn = yield* norm(x, yield* tensor(`${b}.attn_norm.weight`))
      const stacks = projections !== "apart" && (projections === "stacked" || n >= STACK_FROM)
      const stack = stacks ? weights.stacks.get(`${b}.attn_qkv.weight`) : undefined
      // the three products as one: q, k and v are views of its rows ([q; k; v] in each token's column)
      const stacked = stack !== undefined ? yield* Ops.mulMat(stack, xn) : undefined
      const project = (which: "q" | "k" | "v", heads: number) =>
        Effect.gen(function*() {
          const bias = optional(`${b}.attn_${which}.bias`)
          let r: Tensor.Tensor
          if (stacked === undefined) {
            const p = yield* Ops.mulMat(yield* tensor(`${b}.attn_${which}.weight`), xn)
            r = yield* Ops.reshape(bias === undefined ? p : yield* Ops.add(p, bias), [h.headDim, heads, n])
          } else {
            const row = which === "q" ? 0 : which === "k" ? h.heads : h.heads + h.kvHeads
            const es = stacked.nb[0]
            r = yield* Ops.view(stacked, [h.headDim, heads, n], [h.headDim * es, stacked.nb[1]], row * h.headDim * es)
            if (bias !== undefined) r = yield* Ops.add(r, Ops.reshape(bias, [h.headDim, heads]))
          }
          const qkNorm = which === "v" ? undefined : optional(`${b}.attn_${which}_norm.weight`)
          if (qkNorm !== undefined) r = yield* norm(r, qkNorm)
          return r
        })
      // a token's k or v row: a view where the projection is one of the stack's
      const tokenRows = (x: Tensor.Tensor) =>
        Tensor.isContiguous(x) ? Ops.reshape(x, [kvRow, n]) : Ops.view(x, [kvRow, n], [x.nb[2]], 0)
      const q = yield* rope(yield* project("q", h.heads))
      const k = yield* rope(yield* project("k", h.kvHeads))
      const v = yield* project("v", h.kvHeads)
      // flash_attn_ext takes [D, tokens, heads]; its result is [D, heads, tokens]
      const [kAll, vAll] = cache === undefined
        ? [Ops.permute(k, [0, 2, 1, 3]), Ops.permute(v, [0, 2, 1, 3])]
        : [
          KvCache.window(h, yield* Ops.setRows(cache.cache.keys[l], tokenRows(k), positions), keys),
          KvCache.window(h, yield* Ops.setRows(cache.cache.values[l], tokenRows(v), positions), keys)
        ]
      const o = chain
        ? yield* attentionChain(Ops.permute(q, [0, 2, 1, 3]), kAll, vAll, mask, 1 / Math.sqrt(h.headDim))
        : yield* Ops.flashAttnExt(Ops.permute(q, [0, 2, 1, 3]), kAll, vAll, { scale: 1 / Math.sqrt(h.headDim), mask })
      const tail = lastOnly && l === h.layers - 1
      const heads = yield* Ops.reshape(o, [h.headDim * h.heads, n])
      const attn = yield* Ops.mulMat(yield* tensor(`${b}.attn_output.weight`), tail ? lastColumn(heads) : heads)
      x = yield* Ops.add(tail ? yield* lastColumn(x) : x, attn)
      const rows = x.ne[1]
      const xf = yield* norm(x, yield* tensor(`${b}.ffn_norm.weight`))
      // (one row: apart, as a decoding step's, which the device fuses with their swiglu)
      const gateUp = stacks && !tail ? weights.stacks.get(`${b}.ffn_gate_up.weight`) : undefined
      let gate: Tensor.Tensor
      let up: Tensor.Tensor
      if (gateUp === undefined) {
        gate = yield* Ops.mulMat(yield* tensor(`${b}.ffn_gate.weight`), xf)
        up = yield* Ops.mulMat(yield* tensor(`${b}.ffn_up.weight`), xf)
      } else {
        // the two products as one: gate and up are the halves of each token's column
        const both = yield* Ops.mulMat(gateUp, xf)
        const ffn = (yield* tensor(`${b}.ffn_gate.weight`)).ne[1]
        gate = yield* Ops.view(both, [ffn, rows], [both.nb[1]], 0)
        up = yield* Ops.view(both, [ffn, rows], [both.nb[1]], ffn * both.nb[0])
      }
      x = yield* Ops.add(x, Ops.mulMat(yield* tensor(`${b}.ffn_down.weight`), Ops.swiglu(gate, up)))
    }
    const head = optional("output.weight") ?? (yield* tensor("token_embd.weight"))
    const normed = yield* norm(x, yield* tensor("output_norm.weight"))
    const embeddings = options.embeddings === true ? yield* g.output(normed, "embeddings") : undefined
    // (with embeddings, the logits are not an output, so the graph leaves the head out)
    const logits = embeddings === undefined
      ? yield* g.output(Ops.mulMat(head, normed), "logits")
      : yield* Ops.mulMat(head, normed)
    const lastLogits = logits.ne[1] === 1
      ? logits
      : yield* Ops.view(logits, [logits.ne[0], 1], [logits.nb[1]], (logits.ne[1] - 1) * logits.nb[1])
    const next = options.argmax === true && embeddings === undefined
      ? yield* g.output(Ops.argmax(lastLogits), "next")
      : undefined
    return {
      graph: g,
      tokens,
      positions,
      mask,
      logits,
      embeddings,
      next,
      inputs: (start: number) => ({
        positions: Int32Array.from({ length: n }, (_, i) => start + i),
        mask: causalMaskBytes(n, start, keys, mask.dtype === "f32" ? "f32" : "f16")
      })
    }
  })
