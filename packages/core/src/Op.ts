/**
 * Ops as data: one tagged union, the `op` field of every tensor. The shape and type rules live with
 * the builders in `Ops`; backends pattern-match on `_tag`.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type { DType } from "./DType.js"

/**
 * @since 0.1.0
 * @category models
 */
export type UnaryKind = "relu" | "gelu" | "gelu_quick" | "silu" | "tanh" | "sigmoid" | "neg" | "abs"

/**
 * @since 0.1.0
 * @category models
 */
export type GluKind = "swiglu" | "geglu"

/**
 * rope modes as ggml numbers them: 0 rotates adjacent pairs, 2 (neox) the two halves; 8 (mrope, Qwen2-VL)
 * and 40 (imrope, Qwen3-VL) rotate neox-style with a position per section.
 *
 * @since 0.1.0
 * @category models
 */
export type RopeMode = 0 | 2 | 8 | 40

/**
 * rope's parameters: of rope, and of rope fused with the set_rows that stores its result
 *
 * @since 0.1.0
 * @category models
 */
export interface RopeParams {
  readonly nDims: number
  readonly mode: RopeMode
  readonly freqBase: number
  readonly freqScale: number
  /** YaRN: 0 turns it off */
  readonly extFactor: number
  readonly attnFactor: number
  readonly betaFast: number
  readonly betaSlow: number
  readonly nCtxOrig: number
  /** modes 8 and 40: pairs per section (t, h, w, e) */
  readonly sections: readonly [number, number, number, number]
  readonly hasFreqFactors: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export type Op = Data.TaggedEnum<{
  /** a leaf: an input, a weight or a constant */
  None: {}
  Add: {}
  Sub: {}
  Mul: {}
  Div: {}
  Scale: { readonly s: number }
  Sqr: {}
  Sqrt: {}
  Exp: {}
  Log: {}
  Unary: { readonly kind: UnaryKind }
  Clamp: { readonly min: number; readonly max: number }
  MulMat: {}
  /** src: a, then the mask (f32 or f16) when `hasMask`, then the sinks when `hasSinks` */
  SoftMax: { readonly scale: number; readonly maxBias: number; readonly hasMask: boolean; readonly hasSinks: boolean }
  RmsNorm: { readonly eps: number }
  Norm: { readonly eps: number }
  /** x / max(|x|, eps) over each row */
  L2Norm: { readonly eps: number }
  /** normalization over groups of channels (dimension 2) */
  GroupNorm: { readonly nGroups: number; readonly eps: number }
  /**
   * fused attention: src q [D, n_q, H], k [D, n_kv, H_kv], v [D, n_kv, H_kv], then the mask [n_kv, rows]
   * when `hasMask`, then the sinks [H] when `hasSinks`; the result is [D, H, n_q]
   */
  FlashAttnExt: {
    readonly scale: number
    readonly maxBias: number
    readonly logitSoftcap: number
    readonly hasMask: boolean
    readonly hasSinks: boolean
  }
  /** one product per chosen expert: src as [K, N, n_expert], b [K, b1, n_tokens], ids i32 [n_used, n_tokens] */
  MulMatId: {}
  /** a + b's row chosen by ids: src a [n, n_used, n_tokens], b [n, rows], ids i32 [n_used, n_tokens] */
  AddId: {}
  /** src: a, positions (i32), and frequency factors (f32) when `hasFreqFactors` */
  Rope: RopeParams
  GetRows: {}
  /** writes rows of src1 into src0 at the indices src2; the result is a view of src0 */
  SetRows: {}
  /** a copy converting to the tensor's dtype (ggml's cpy/dup) */
  Cpy: { readonly dtype: DType }
  Cont: {}
  SumRows: {}
  Sum: {}
  Mean: {}
  Argmax: {}
  Argsort: { readonly order: "asc" | "desc" }
  TopK: { readonly k: number }
  Cumsum: {}
  Concat: { readonly dim: number }
  Glu: { readonly kind: GluKind; readonly swapped: boolean }
  DiagMaskInf: { readonly nPast: number }
  Pad: { readonly p: readonly [number, number, number, number] }
  Repeat: {}
  View: {}
  Reshape: {}
  Permute: { readonly axes: readonly [number, number, number, number] }
  Transpose: {}
  /** fused by an optimizer: rms_norm(src0) * src1 */
  RmsNormMul: { readonly eps: number }
  /** fused by an optimizer: rms_norm(src0 + src1) [* src2]; the sum is not kept */
  AddRmsNorm: { readonly eps: number; readonly withMul: boolean }
  /** fused by an optimizer: mul_mat(src0, src1) + src2 */
  MulMatAdd: {}
  /** fused by an optimizer: silu(mul_mat(src0, src2)) * mul_mat(src1, src2), a gated FFN's two products */
  MulMatSwiglu: {}
  /**
   * fused by an optimizer: cont(permute(mul_mat(src0, src1), axes)), the product stored permuted (attention's
   * V·P into the [D, heads, tokens] the output projection reads)
   */
  MulMatPermuted: { readonly axes: readonly [number, number, number, number] }
  /**
   * fused by an optimizer: the products of every source but the last with the last, their rows stacked
   * (attention's q, k and v over the same activations); the products become views of it
   */
  MulMatStack: { readonly parts: number }
  /**
   * fused by an optimizer: src0 + src1 kept, then rms_norm of it [* src2], the two stacked in each row
   * (2 ne0 values: the sum, then the norm): the residual stream's add and the next norm in one
   */
  AddRmsNormKeep: { readonly eps: number; readonly withMul: boolean }
  /**
   * fused by an optimizer: rms_norm(src0 + src1) [* src2], the sum stored over src0 (a prompt's residual
   * stream: its add and the next norm in one, the add becoming a view of src0 after this node)
   */
  AddRmsNormStore: { readonly eps: number; readonly withMul: boolean }
  /**
   * fused by an optimizer: rope(src1, positions src2[, factors]) stored as rows of src0 at the indices of
   * the last source (set_rows of the rotated keys into a cache); the result is a view of src0
   */
  RopeSetRows: RopeParams
  /**
   * fused by an optimizer: rope_set_rows (its sources first), then the set_rows beside it that stores a
   * layer's values at the same indices: the values' table and rows are the last two sources. The result
   * is a view of src0 (the keys' table); the values' table is written too (a cache's two stores in one)
   */
  RopeSetRowsKv: RopeParams
  /**
   * fused by an optimizer: flash_attn_ext with q rotated first: src as flash_attn_ext's (q [D, n_q, H], k,
   * v, the mask, the sinks), then rope's positions [n_q] and its frequency factors when
   * `rope.hasFreqFactors`; q's row i is turned by positions[i] (a query's rope and its attention in one)
   */
  RopeFlashAttnExt: {
    readonly scale: number
    readonly maxBias: number
    readonly logitSoftcap: number
    readonly hasMask: boolean
    readonly hasSinks: boolean
    readonly rope: RopeParams
  }
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const Op = Data.taggedEnum<Op>()

/**
 * @since 0.1.0
 * @category models
 */
export type Tag = Op["_tag"]

const names: Record<Tag, string> = {
  None: "none",
  Add: "add",
  Sub: "sub",
  Mul: "mul",
  Div: "div",
  Scale: "scale",
  Sqr: "sqr",
  Sqrt: "sqrt",
  Exp: "exp",
  Log: "log",
  Unary: "unary",
  Clamp: "clamp",
  MulMat: "mul_mat",
  SoftMax: "soft_max",
  RmsNorm: "rms_norm",
  Norm: "norm",
  L2Norm: "l2_norm",
  GroupNorm: "group_norm",
  FlashAttnExt: "flash_attn_ext",
  MulMatId: "mul_mat_id",
  AddId: "add_id",
  Rope: "rope",
  GetRows: "get_rows",
  SetRows: "set_rows",
  Cpy: "cpy",
  Cont: "cont",
  SumRows: "sum_rows",
  Sum: "sum",
  Mean: "mean",
  Argmax: "argmax",
  Argsort: "argsort",
  TopK: "top_k",
  Cumsum: "cumsum",
  Concat: "concat",
  Glu: "glu",
  DiagMaskInf: "diag_mask_inf",
  Pad: "pad",
  Repeat: "repeat",
  View: "view",
  Reshape: "reshape",
  Permute: "permute",
  Transpose: "transpose",
  RmsNormMul: "rms_norm_mul",
  AddRmsNorm: "add_rms_norm",
  MulMatAdd: "mul_mat_add",
  MulMatSwiglu: "mul_mat_swiglu",
  MulMatPermuted: "mul_mat_permuted",
  MulMatStack: "mul_mat_stack",
  AddRmsNormKeep: "add_rms_norm_keep",
  AddRmsNormStore: "add_rms_norm_store",
  RopeSetRows: "rope_set_rows",
  RopeSetRowsKv: "rope_set_rows_kv",
  RopeFlashAttnExt: "rope_flash_attn_ext"
}

/**
 * ggml's name of an op (unary ops by their kind: "silu", "gelu", ...).
 *
 * @since 0.1.0
 * @category getters
 */
export const name = (op: Op): string => op._tag === "Unary" ? op.kind : names[op._tag]

/**
 * Ops that only reinterpret memory: backends run nothing for them.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isView = (op: Op): boolean =>
  op._tag === "View" || op._tag === "Reshape" || op._tag === "Permute" || op._tag === "Transpose"

/**
 * Ops whose kernels may write their result over a source of the same layout (ggml_op_can_inplace).
 *
 * @since 0.1.0
 * @category predicates
 */
export const canInPlace = (op: Op): boolean => {
  switch (op._tag) {
    case "Scale":
    case "DiagMaskInf":
    case "Add":
    case "Sub":
    case "Mul":
    case "Div":
    case "Sqr":
    case "Sqrt":
    case "Log":
    case "Exp":
    case "Unary":
    case "Rope":
    case "RmsNorm":
    case "SoftMax":
      return true
    default:
      return false
  }
}

/**
 * Whether an op takes operand `index` quantized: the weights of products (mul_mat, mul_mat_id), a
 * table of get_rows, the source of a copy. Elsewhere quantized tensors have no meaning as values.
 *
 * @since 0.1.0
 * @category predicates
 */
export const readsQuantized = (op: Op, index: number): boolean => {
  switch (op._tag) {
    case "MulMat":
    case "MulMatAdd":
    case "MulMatPermuted":
    case "MulMatId":
    case "GetRows":
    case "Cpy":
    case "Cont":
      return index === 0
    case "MulMatSwiglu":
      return index === 0 || index === 1
    case "MulMatStack":
      return index < op.parts
    default:
      return isView(op)
  }
}

/**
 * Whether an op writes a quantized result: a copy that quantizes, or a view of quantized memory.
 *
 * @since 0.1.0
 * @category predicates
 */
export const writesQuantized = (op: Op): boolean => op._tag === "Cpy" || op._tag === "Cont" || isView(op)

/**
 * YaRN's correction dimensions of a rope, as ggml computes them (ggml_rope_yarn_corr_dims): the pairs
 * below `low` keep extrapolated angles, those past `high` interpolated ones, and a ramp mixes the two
 * between. Every backend reads them from here, so they agree.
 *
 * @since 0.1.0
 * @category rope
 */
export const ropeYarnCorrDims = (
  op: RopeParams
): { readonly low: number; readonly high: number } => {
  const dim = (beta: number) => (op.nDims * Math.log(op.nCtxOrig / (beta * 2 * Math.PI))) / (2 * Math.log(op.freqBase))
  return {
    low: Math.max(0, Math.floor(dim(op.betaFast))),
    high: Math.min(op.nDims - 1, Math.ceil(dim(op.betaSlow)))
  }
}
