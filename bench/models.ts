/**
 * The cases of the ops models run (issue 18): matrix-vector products over quantized weights (decode),
 * prefill products over them against f16 weights, and fused attention against the unfused chain
 * (mul_mat, soft_max, mul_mat) on the same backend. Not project code: measuring aids.
 */
import type { Backend, Graph } from "@effect-gpu/core"
import { DType, Ops } from "@effect-gpu/core"
import { Effect } from "effect"
import type { Case } from "./case.js"

type Prepared = (
  backend: Backend.Backend,
  build: (g: Graph.Builder) => Effect.Effect<void, unknown>
) => ReturnType<Case["ours"]>

/** a product of weights of `dtype` [K, M] and f32 (f16 for f16 weights) activations [K, N] */
const product = (prepared: Prepared, dtype: DType.DType, M: number, N: number, K: number, name: string): Case => ({
  name,
  size: `${M}x${N}x${K}`,
  // decode reads the weights once: its rate is their bytes; prefill's is its flops
  work: N <= 8 ? { bytes: DType.rowSize(dtype, K) * M } : { flops: 2 * M * N * K, dtype: "f16" },
  ours: (_, backend) =>
    prepared(backend, (g) =>
      Effect.gen(function*() {
        const a = yield* g.param("a", dtype, [K, M])
        // a prompt's activations f16, as a model's products take them and as the f16 case always had them;
        // a decoding step's f32
        const b = yield* g.input("b", dtype === "f16" || N > 8 ? "f16" : "f32", [K, N])
        yield* g.output(Ops.mulMat(a, b))
      }))
})

/**
 * attention of n_q queries over n_kv keys (H heads, H_kv KV heads, head size D), k and v f16, a mask:
 * fused (flash_attn_ext), or the chain a model runs without it: scores = k . q, softmax with the mask,
 * then the values (kept transposed, as llama.cpp's cache is without flash attention) times the scores
 */
const attention = (
  prepared: Prepared,
  fused: boolean,
  nQ: number,
  nKv: number,
  H: number,
  Hkv: number,
  D: number
): Case => ({
  name: `${fused ? "flash_attn" : "attn_chain"}_${nQ === 1 ? "decode" : "prefill"}`,
  size: `q${nQ} kv${nKv} heads${H}/${Hkv} D${D}`,
  work: { flops: 4 * nQ * nKv * D * H },
  ours: (_, backend) =>
    prepared(backend, (g) =>
      Effect.gen(function*() {
        const q = yield* g.input("q", "f32", [D, nQ, H])
        const mask = yield* g.input("mask", "f16", [nKv, nQ])
        const scale = 1 / Math.sqrt(D)
        if (fused) {
          const k = yield* g.input("k", "f16", [D, nKv, Hkv])
          const v = yield* g.input("v", "f16", [D, nKv, Hkv])
          yield* g.output(Ops.flashAttnExt(q, k, v, { scale, mask }))
          return
        }
        const k = yield* g.input("k", "f16", [D, nKv, Hkv])
        const vT = yield* g.input("vT", "f16", [nKv, D, Hkv])
        const p = yield* Ops.softMax(Ops.mulMat(k, q), { mask, scale })
        yield* g.output(Ops.mulMat(vT, p))
      }))
})

/** @internal */
export const modelCases = (prepared: Prepared, quick: boolean): ReadonlyArray<Case> => {
  const H = quick ? 256 : 4096
  const rows = quick ? [256] : [4096, 14336]
  const decodeTypes: ReadonlyArray<DType.DType> = ["q4_0", "q8_0", "q4_K", "q6_K"]
  const prefillTypes: ReadonlyArray<DType.DType> = ["f16", "q4_0", "q8_0"]
  const T = quick ? 64 : 512
  return [
    ...decodeTypes.flatMap((t) => rows.map((M) => product(prepared, t, M, 1, H, `mv_${t}`))),
    ...prefillTypes.flatMap((t) => rows.map((M) => product(prepared, t, M, T, H, `prefill_${t}`))),
    ...[true, false].flatMap((fused) => [
      attention(prepared, fused, 1, quick ? 256 : 4096, 32, 8, 128),
      attention(prepared, fused, quick ? 64 : 2048, quick ? 64 : 2048, 32, 8, 128)
    ])
  ]
}
