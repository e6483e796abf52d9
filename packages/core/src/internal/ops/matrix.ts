/**
 * Op builders: matrix products (any weight type), products over chosen experts, and fused attention.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import * as DType from "../../DType.js"
import type { ShapeError } from "../../GpuError.js"
import { Op } from "../../Op.js"
import type { TensorLike } from "../../Tensor.js"
import * as Tensor from "../../Tensor.js"
import { isFloat, requireFloat } from "./checks.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

/** weights of any type but i32; quantized weights meet f32 (or f16) activations */
const requireWeights = (op: string, a: Tensor.Tensor, b: Tensor.Tensor) => {
  if (!isFloat(b)) Tensor.fail(op, [a, b], `expects f32 or f16 activations, got ${b.dtype}`)
  if (a.dtype === "i32") Tensor.fail(op, [a, b], "weights cannot be i32")
  if (DType.isQuantized(a.dtype) && !Tensor.hasContiguousRows(a)) {
    Tensor.fail(op, [a, b], `${a.dtype} weights need contiguous rows of blocks`)
  }
}

/** @internal: the result shape of mul_mat(a, b), or a ShapeError */
export const checkMulMat = (a: Tensor.Tensor, b: Tensor.Tensor): Tensor.Shape => {
  requireWeights("mul_mat", a, b)
  if (a.ne[0] !== b.ne[0]) Tensor.fail("mul_mat", [a, b], "src0 and src1 need the same ne[0] (the shared dimension K)")
  if (b.ne[2] % a.ne[2] !== 0 || b.ne[3] % a.ne[3] !== 0) {
    Tensor.fail("mul_mat", [a, b], "src0's batch dimensions must divide src1's (ne[2], ne[3])")
  }
  if (a.nb[0] > a.nb[1] && a.ne[1] > 1 && a.ne[0] > 1) {
    Tensor.fail("mul_mat", [a, b], "src0 must not be transposed (make it contiguous first)")
  }
  return [a.ne[1], b.ne[1], b.ne[2], b.ne[3]]
}

/** @internal */
export const mulMat: (a: TensorLike, b: TensorLike) => Built = Tensor.lift2((a, b) =>
  Tensor.unsafeMake("", "f32", checkMulMat(a, b), Op.MulMat(), [a, b])
)

/** @internal */
export const mulMatId = (as: TensorLike, b: TensorLike, ids: TensorLike): Built =>
  Tensor.lift3((as: Tensor.Tensor, b: Tensor.Tensor, ids: Tensor.Tensor) => {
    const all = [as, b, ids]
    requireWeights("mul_mat_id", as, b)
    if (ids.dtype !== "i32") Tensor.fail("mul_mat_id", all, "ids must be i32")
    if (as.ne[3] !== 1 || b.ne[3] !== 1 || ids.ne[2] !== 1 || ids.ne[3] !== 1) {
      Tensor.fail("mul_mat_id", all, "experts [K, N, n_expert], b [K, b1, n_tokens] and ids [n_used, n_tokens]")
    }
    if (as.ne[0] !== b.ne[0]) Tensor.fail("mul_mat_id", all, "experts and b need the same ne[0] (K)")
    if (ids.ne[1] !== b.ne[2]) Tensor.fail("mul_mat_id", all, "ids need one column per token (b.ne[2])")
    if (b.ne[1] !== 1 && b.ne[1] !== ids.ne[0]) {
      Tensor.fail("mul_mat_id", all, "b needs one row per chosen expert (ids.ne[0]) or one shared row")
    }
    if (ids.ne[0] > as.ne[2]) Tensor.fail("mul_mat_id", all, "more experts used than there are")
    return Tensor.unsafeMake("", "f32", [as.ne[1], ids.ne[0], ids.ne[1], 1], Op.MulMatId(), all)
  })(as, b, ids)

/** @internal */
export const addId = (a: TensorLike, b: TensorLike, ids: TensorLike): Built =>
  Tensor.lift3((a: Tensor.Tensor, b: Tensor.Tensor, ids: Tensor.Tensor) => {
    const all = [a, b, ids]
    requireFloat("add_id", a, b)
    if (ids.dtype !== "i32") Tensor.fail("add_id", all, "ids must be i32")
    if (a.ne[3] !== 1 || ids.ne[0] !== a.ne[1] || ids.ne[1] !== a.ne[2] || b.ne[0] !== a.ne[0]) {
      Tensor.fail("add_id", all, "a [n, n_used, n_tokens], b [n, rows] and ids [n_used, n_tokens]")
    }
    return Tensor.unsafeMake("", a.dtype, a.ne, Op.AddId(), all)
  })(a, b, ids)

/** the options of flash_attn_ext */
export interface AttentionOptions {
  /** applied to the scores, usually 1 / sqrt(D) */
  readonly scale: number
  /** f16 (or f32) [n_kv, rows >= n_q]: added to the scores (-inf hides a key) */
  readonly mask?: TensorLike | undefined
  /** ALiBi: slopes per head from this bias; 0 (default) leaves the mask as it is */
  readonly maxBias?: number
  /** scores become softcap * tanh(score / softcap); 0 (default) is off */
  readonly logitSoftcap?: number
  /** f32 [H]: a logit per head that joins each softmax's denominator and no output */
  readonly sinks?: TensorLike | undefined
}

/** @internal */
export const flashAttnExt = (q: TensorLike, k: TensorLike, v: TensorLike, options: AttentionOptions): Built => {
  const hasMask = options.mask !== undefined
  const hasSinks = options.sinks !== undefined
  const op = Op.FlashAttnExt({
    scale: options.scale,
    maxBias: options.maxBias ?? 0,
    logitSoftcap: options.logitSoftcap ?? 0,
    hasMask,
    hasSinks
  })
  const extra = [options.mask, options.sinks].filter((t): t is TensorLike => t !== undefined)
  return Tensor.liftN((ts: ReadonlyArray<Tensor.Tensor>) => {
    const [q, k, v, ...rest] = ts
    const mask = hasMask ? rest[0] : undefined
    const sinks = hasSinks ? rest[rest.length - 1] : undefined
    requireFloat("flash_attn_ext", q, k, v)
    if (q.dtype !== "f32") Tensor.fail("flash_attn_ext", ts, "q must be f32")
    if (k.ne[0] !== q.ne[0]) Tensor.fail("flash_attn_ext", ts, "q and k need the same head size (ne[0])")
    if (v.ne[1] !== k.ne[1] || v.ne[2] !== k.ne[2]) Tensor.fail("flash_attn_ext", ts, "k and v need one row per key")
    if (k.ne[2] === 0 || q.ne[2] % k.ne[2] !== 0) {
      Tensor.fail("flash_attn_ext", ts, "q's heads must be a multiple of k's (grouped-query attention)")
    }
    if (q.ne[3] % k.ne[3] !== 0) Tensor.fail("flash_attn_ext", ts, "k's batch must divide q's")
    for (const t of [q, k, v]) {
      if (!Tensor.hasContiguousRows(t)) Tensor.fail("flash_attn_ext", ts, "q, k and v need contiguous rows")
    }
    if (mask !== undefined) {
      if (mask.ne[0] !== k.ne[1] || mask.ne[1] < q.ne[1]) {
        Tensor.fail("flash_attn_ext", ts, "the mask needs one column per key and at least one row per query")
      }
      if (q.ne[2] % mask.ne[2] !== 0 || q.ne[3] % mask.ne[3] !== 0) {
        Tensor.fail("flash_attn_ext", ts, "the mask's dims 2, 3 must divide q's")
      }
    }
    if (sinks !== undefined && (sinks.dtype !== "f32" || Tensor.nelements(sinks) !== q.ne[2])) {
      Tensor.fail("flash_attn_ext", ts, "sinks must be f32 with one value per head")
    }
    return Tensor.unsafeMake("", "f32", [v.ne[0], q.ne[2], q.ne[1], q.ne[3]], op, ts)
  })([q, k, v, ...extra])
}
