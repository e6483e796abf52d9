/**
 * The forward graph of a llama-family model over a run of tokens, built with Ops as llama.cpp builds it:
 * embedding rows, then per layer rms_norm, q/k/v projections (qwen2's biases, qwen3's q/k norms), rope,
 * fused attention under a causal mask with grouped KV heads, the output projection and a residual, then
 * rms_norm and the swiglu feed-forward with a residual; the output norm and head give the logits.
 * First step: the whole sequence at once, without a KV cache.
 *
 * @since 0.1.0
 */
import type { ShapeError } from "@effect-gpu/core/GpuError"
import * as Graph from "@effect-gpu/core/Graph"
import * as Ops from "@effect-gpu/core/Ops"
import type * as Tensor from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type { Hyperparameters } from "./Hyperparameters.js"
import { ModelError } from "./ModelError.js"
import type { Weights } from "./Weights.js"

/**
 * The graph and the inputs to set before computing it: the token ids (i32), their positions (i32) and
 * the causal mask (f16, 0 or -inf); `logits` is [vocab, tokens].
 *
 * @since 0.1.0
 * @category models
 */
export interface Forward {
  readonly graph: Graph.Builder
  readonly tokens: Tensor.Tensor
  readonly positions: Tensor.Tensor
  readonly mask: Tensor.Tensor
  readonly logits: Tensor.Tensor
  /** the values of positions and mask for `n` tokens from position 0 */
  readonly inputs: (n: number) => { readonly positions: Int32Array; readonly mask: Float32Array }
}

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
  file = "<model>"
): Effect.Effect<Forward, ModelError | ShapeError> =>
  Effect.gen(function*() {
    const tensor = (name: string): Effect.Effect<Tensor.Tensor, ModelError> => {
      const t = weights.tensors.get(name)
      return t === undefined
        ? Effect.fail(new ModelError({ file, problem: `tensor ${name} is missing` }))
        : Effect.succeed(t)
    }
    const optional = (name: string) => weights.tensors.get(name)
    const g = Graph.make()
    const tokens = yield* g.input("tokens", "i32", [n])
    const positions = yield* g.input("positions", "i32", [n])
    const mask = yield* g.input("mask", "f16", [n, n])
    const norm = (x: Tensor.TensorLike, weight: Tensor.Tensor) => Ops.mul(Ops.rmsNorm(x, h.rmsEps), weight)
    const rope = (x: Tensor.TensorLike) =>
      Ops.rope(x, positions, { nDims: h.ropeDims, mode: h.ropeNeox ? 2 : 0, freqBase: h.ropeFreqBase })
    let x: Tensor.Tensor = yield* Ops.getRows(yield* tensor("token_embd.weight"), tokens)
    for (let l = 0; l < h.layers; l++) {
      const b = `blk.${l}`
      const xn = yield* norm(x, yield* tensor(`${b}.attn_norm.weight`))
      const project = (which: "q" | "k" | "v", heads: number) =>
        Effect.gen(function*() {
          const bias = optional(`${b}.attn_${which}.bias`)
          let p = yield* Ops.mulMat(yield* tensor(`${b}.attn_${which}.weight`), xn)
          if (bias !== undefined) p = yield* Ops.add(p, bias)
          let r = yield* Ops.reshape(p, [h.headDim, heads, n])
          const qkNorm = which === "v" ? undefined : optional(`${b}.attn_${which}_norm.weight`)
          if (qkNorm !== undefined) r = yield* norm(r, qkNorm)
          return r
        })
      const q = yield* rope(yield* project("q", h.heads))
      const k = yield* rope(yield* project("k", h.kvHeads))
      const v = yield* project("v", h.kvHeads)
      // flash_attn_ext takes [D, tokens, heads]; its result is [D, heads, tokens]
      const o = yield* Ops.flashAttnExt(
        Ops.permute(q, [0, 2, 1, 3]),
        Ops.permute(k, [0, 2, 1, 3]),
        Ops.permute(v, [0, 2, 1, 3]),
        { scale: 1 / Math.sqrt(h.headDim), mask }
      )
      const attn = yield* Ops.mulMat(yield* tensor(`${b}.attn_output.weight`), Ops.reshape(o, [h.headDim * h.heads, n]))
      x = yield* Ops.add(x, attn)
      const xf = yield* norm(x, yield* tensor(`${b}.ffn_norm.weight`))
      const gate = Ops.mulMat(yield* tensor(`${b}.ffn_gate.weight`), xf)
      const up = Ops.mulMat(yield* tensor(`${b}.ffn_up.weight`), xf)
      x = yield* Ops.add(x, Ops.mulMat(yield* tensor(`${b}.ffn_down.weight`), Ops.swiglu(gate, up)))
    }
    const head = optional("output.weight") ?? (yield* tensor("token_embd.weight"))
    const logits = yield* g.output(Ops.mulMat(head, norm(x, yield* tensor("output_norm.weight"))), "logits")
    return {
      graph: g,
      tokens,
      positions,
      mask,
      logits,
      inputs: (count: number) => ({
        positions: Int32Array.from({ length: count }, (_, i) => i),
        mask: Float32Array.from(
          { length: count * count },
          (_, i) => (i % count) <= Math.floor(i / count) ? 0 : -Infinity
        )
      })
    }
  })
