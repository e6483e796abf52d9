/**
 * The op builders: each checks ggml's shape and type rules and returns the result tensor, or fails with
 * a `ShapeError` naming the op and the operands. Arguments may be tensors or effects that build them,
 * so calls nest: `Ops.softMax(Ops.mulMat(a, b))`. A builder's effect makes its tensor once: yielding
 * the same effect again (or passing it to two ops) gives the same tensor, as a value would.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type { ShapeError } from "./GpuError.js"
import { requireContiguousRows, requireFloat } from "./internal/ops/checks.js"
import * as Copies from "./internal/ops/copies.js"
import * as Gated from "./internal/ops/gated.js"
import * as Matrix from "./internal/ops/matrix.js"
import * as Normalization from "./internal/ops/normalization.js"
import * as Reductions from "./internal/ops/reductions.js"
import * as Rows from "./internal/ops/rows.js"
import * as Shape from "./internal/ops/shape.js"
import type { UnaryKind } from "./Op.js"
import { Op } from "./Op.js"
import type { TensorLike } from "./Tensor.js"
import * as Tensor from "./Tensor.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

// ---------------------------------------------------------------------------------------------------------------
// element-wise
// ---------------------------------------------------------------------------------------------------------------

const binary = (op: Op, opName: string) =>
  Tensor.lift2((a, b) => {
    requireFloat(opName, a, b)
    if (!Tensor.canRepeat(b, a)) {
      Tensor.fail(opName, [a, b], "src1 must broadcast over src0: each dimension of src0 a multiple of src1's")
    }
    requireContiguousRows(opName, b)
    return Tensor.unsafeMake("", a.dtype, a.ne, op, [a, b])
  })

/**
 * a + b, b broadcast over a (ggml_add).
 *
 * @since 0.1.0
 * @category element-wise
 */
export const add: (a: TensorLike, b: TensorLike) => Built = binary(Op.Add(), "add")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const sub: (a: TensorLike, b: TensorLike) => Built = binary(Op.Sub(), "sub")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const mul: (a: TensorLike, b: TensorLike) => Built = binary(Op.Mul(), "mul")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const div: (a: TensorLike, b: TensorLike) => Built = binary(Op.Div(), "div")

const unaryLike = (op: Op) =>
  Tensor.lift1((a) => {
    requireFloat(opName(op), a)
    return Tensor.unsafeMake("", a.dtype, a.ne, op, [a])
  })

const opName = (op: Op) => op._tag === "Unary" ? op.kind : op._tag.toLowerCase()

/**
 * @since 0.1.0
 * @category element-wise
 */
export const scale = (a: TensorLike, s: number): Built => unaryLike(Op.Scale({ s }))(a)

/**
 * @since 0.1.0
 * @category element-wise
 */
export const sqr: (a: TensorLike) => Built = unaryLike(Op.Sqr())

/**
 * @since 0.1.0
 * @category element-wise
 */
export const sqrt: (a: TensorLike) => Built = unaryLike(Op.Sqrt())

/**
 * @since 0.1.0
 * @category element-wise
 */
export const exp: (a: TensorLike) => Built = unaryLike(Op.Exp())

/**
 * @since 0.1.0
 * @category element-wise
 */
export const log: (a: TensorLike) => Built = unaryLike(Op.Log())

/**
 * @since 0.1.0
 * @category element-wise
 */
export const clamp = (a: TensorLike, min: number, max: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    requireFloat("clamp", a)
    if (!(min <= max)) Tensor.fail("clamp", [a], `min ${min} is above max ${max}`)
    return Tensor.unsafeMake("", a.dtype, a.ne, Op.Clamp({ min, max }), [a])
  })(a)

/**
 * @since 0.1.0
 * @category element-wise
 */
export const unary = (a: TensorLike, kind: UnaryKind): Built => unaryLike(Op.Unary({ kind }))(a)

/**
 * @since 0.1.0
 * @category element-wise
 */
export const relu = (a: TensorLike): Built => unary(a, "relu")

/**
 * gelu, tanh approximation (as ggml).
 *
 * @since 0.1.0
 * @category element-wise
 */
export const gelu = (a: TensorLike): Built => unary(a, "gelu")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const geluQuick = (a: TensorLike): Built => unary(a, "gelu_quick")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const silu = (a: TensorLike): Built => unary(a, "silu")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const tanh = (a: TensorLike): Built => unary(a, "tanh")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const sigmoid = (a: TensorLike): Built => unary(a, "sigmoid")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const neg = (a: TensorLike): Built => unary(a, "neg")

/**
 * @since 0.1.0
 * @category element-wise
 */
export const abs = (a: TensorLike): Built => unary(a, "abs")

// ---------------------------------------------------------------------------------------------------------------
// matrix
// ---------------------------------------------------------------------------------------------------------------

/** @internal */
export const checkMulMat: (a: Tensor.Tensor, b: Tensor.Tensor) => Tensor.Shape = Matrix.checkMulMat

/**
 * y[i, j] = sum_k a[k, i] * b[k, j] for each batch; a's batch dimensions broadcast over b's (ggml_mul_mat).
 * `a` (the weights) may be f32, f16 or quantized, `b` f32 or f16. The result is f32.
 *
 * @since 0.1.0
 * @category matrix
 */
export const mulMat: (a: TensorLike, b: TensorLike) => Built = Matrix.mulMat

/**
 * A product per chosen expert (ggml_mul_mat_id): experts `as` [K, N, n_expert] of any weight type, `b`
 * f32 [K, b1, n_tokens] (b1 = n_used, one activation per chosen expert, or 1, shared), `ids` i32
 * [n_used, n_tokens]; y[:, e, t] = as[:, :, ids[e, t]]^T . b[:, e % b1, t], f32 [N, n_used, n_tokens].
 *
 * @since 0.1.0
 * @category matrix
 */
export const mulMatId: (as: TensorLike, b: TensorLike, ids: TensorLike) => Built = Matrix.mulMatId

/**
 * y[:, e, t] = a[:, e, t] + b[:, ids[e, t]] (ggml_add_id: a bias per chosen expert).
 *
 * @since 0.1.0
 * @category matrix
 */
export const addId: (a: TensorLike, b: TensorLike, ids: TensorLike) => Built = Matrix.addId

/**
 * Fused attention (ggml_flash_attn_ext): q f32 [D, n_q, H], k and v (f16 or f32) [D, n_kv, H_kv] with H
 * a multiple of H_kv (query head h reads KV head h / (H / H_kv)); softmax(scale * q.k [soft-capped] +
 * slope * mask [+ a sink]) . v, f32 [D, H, n_q] (heads in dimension 1, as ggml permutes it).
 *
 * @since 0.1.0
 * @category matrix
 */
export const flashAttnExt: (
  q: TensorLike,
  k: TensorLike,
  v: TensorLike,
  options: Matrix.AttentionOptions
) => Built = Matrix.flashAttnExt

// ---------------------------------------------------------------------------------------------------------------
// normalization
// ---------------------------------------------------------------------------------------------------------------

/**
 * softmax(a * scale + slope * mask) over each row; the mask (f32 or f16) has a's ne[0], at least a's rows,
 * and broadcasts over dimensions 2 and 3. `maxBias` > 0 gives ALiBi slopes per head (dimension 2).
 * `sinks` (f32, one per a.ne[2]) join each row's max and denominator, and no output.
 *
 * @since 0.1.0
 * @category normalization
 */
export const softMax: typeof Normalization.softMax = Normalization.softMax

/**
 * x / sqrt(mean(x^2) + eps) over each row.
 *
 * @since 0.1.0
 * @category normalization
 */
export const rmsNorm: typeof Normalization.rmsNorm = Normalization.rmsNorm

/**
 * (x - mean) / sqrt(var + eps) over each row.
 *
 * @since 0.1.0
 * @category normalization
 */
export const normalize: typeof Normalization.normalize = Normalization.normalize

/**
 * Rotary position embedding. `pos` is i32 with one position per a.ne[2] (four per a.ne[2] in modes 8 and
 * 40: t, h, w and e positions one after another). Mode 0 rotates adjacent pairs, mode 2 (neox) rotates
 * (i, i + nDims/2); only the first `nDims` of each row rotate. Frequency factors divide each pair's
 * frequency; YaRN (extFactor > 0) blends interpolated and extrapolated angles as ggml's rope_ext.
 *
 * @since 0.1.0
 * @category normalization
 */
export const rope: typeof Normalization.rope = Normalization.rope

/**
 * x / max(sqrt(sum x^2), eps) over each row.
 *
 * @since 0.1.0
 * @category normalization
 */
export const l2Norm: typeof Normalization.l2Norm = Normalization.l2Norm

/**
 * Normalization over groups of channels (ggml_group_norm): channels are dimension 2, in groups of
 * ceil(ne2 / nGroups); each group's mean and variance are over ne0 x ne1 x its channels.
 *
 * @since 0.1.0
 * @category normalization
 */
export const groupNorm: typeof Normalization.groupNorm = Normalization.groupNorm
// ---------------------------------------------------------------------------------------------------------------
// rows
// ---------------------------------------------------------------------------------------------------------------

/**
 * Rows of `a` picked by the i32 indices `idx` ([n, a.ne[2], a.ne[3]]); the result is f32 (i32 for i32).
 *
 * @since 0.1.0
 * @category rows
 */
export const getRows: typeof Rows.getRows = Rows.getRows

/**
 * Writes row i of `src` into row idx[i] of `dst`, converting to dst's type; the result is a view of `dst`
 * (ggml_set_rows: the write lands in dst's memory).
 *
 * @since 0.1.0
 * @category rows
 */
export const setRows: typeof Rows.setRows = Rows.setRows
// ---------------------------------------------------------------------------------------------------------------
// copies
// ---------------------------------------------------------------------------------------------------------------

/**
 * A contiguous copy converted to `dtype` (f32 <-> f16, or the same type).
 *
 * @since 0.1.0
 * @category copies
 */
export const cpy: typeof Copies.cpy = Copies.cpy

/**
 * A contiguous copy of the same type (ggml_dup).
 *
 * @since 0.1.0
 * @category copies
 */
export const dup: typeof Copies.dup = Copies.dup

/**
 * @since 0.1.0
 * @category copies
 */
export const cont: typeof Copies.cont = Copies.cont
// ---------------------------------------------------------------------------------------------------------------
// reductions and sorting
// ---------------------------------------------------------------------------------------------------------------

/**
 * Sum of each row: [1, ne1, ne2, ne3].
 *
 * @since 0.1.0
 * @category reductions
 */
export const sumRows: typeof Reductions.sumRows = Reductions.sumRows

/**
 * Sum of all elements: [1, 1, 1, 1].
 *
 * @since 0.1.0
 * @category reductions
 */
export const sum: typeof Reductions.sum = Reductions.sum

/**
 * Mean of each row: [1, ne1, ne2, ne3].
 *
 * @since 0.1.0
 * @category reductions
 */
export const mean: typeof Reductions.mean = Reductions.mean

/**
 * Running sum along each row.
 *
 * @since 0.1.0
 * @category reductions
 */
export const cumsum: typeof Reductions.cumsum = Reductions.cumsum

/**
 * Index of the largest element of each row of a matrix: i32 [ne1].
 *
 * @since 0.1.0
 * @category sorting
 */
export const argmax: typeof Reductions.argmax = Reductions.argmax

/**
 * Indices that sort each row: i32, same shape.
 *
 * @since 0.1.0
 * @category sorting
 */
export const argsort: typeof Reductions.argsort = Reductions.argsort

/**
 * Indices of the k largest elements of each row, in any order: i32 [k, ne1, ne2, ne3].
 *
 * @since 0.1.0
 * @category sorting
 */
export const topK: typeof Reductions.topK = Reductions.topK
// ---------------------------------------------------------------------------------------------------------------
// shape
// ---------------------------------------------------------------------------------------------------------------

/**
 * a and b joined along `dim`; the other dimensions must match.
 *
 * @since 0.1.0
 * @category shape
 */
export const concat: typeof Shape.concat = Shape.concat

/**
 * Zeros appended at the end of each dimension.
 *
 * @since 0.1.0
 * @category shape
 */
export const pad: typeof Shape.pad = Shape.pad

/**
 * `a` tiled to the shape of `shape` (each of its dimensions a multiple of a's).
 *
 * @since 0.1.0
 * @category shape
 */
export const repeat: typeof Shape.repeat = Shape.repeat

/**
 * Sets a[i, j] to -inf where i > j + nPast (a causal mask).
 *
 * @since 0.1.0
 * @category shape
 */
export const diagMaskInf: typeof Shape.diagMaskInf = Shape.diagMaskInf
// ---------------------------------------------------------------------------------------------------------------
// gated linear units
// ---------------------------------------------------------------------------------------------------------------

/**
 * act(first half of each row) * second half (halves exchanged when `swapped`); with `gate`, act(a) * gate.
 *
 * @since 0.1.0
 * @category gated
 */
export const glu: typeof Gated.glu = Gated.glu

/**
 * silu(a) * gate, or on the halves of a.
 *
 * @since 0.1.0
 * @category gated
 */
export const swiglu: typeof Gated.swiglu = Gated.swiglu

/**
 * gelu(a) * gate, or on the halves of a.
 *
 * @since 0.1.0
 * @category gated
 */
export const geglu: typeof Gated.geglu = Gated.geglu
// ---------------------------------------------------------------------------------------------------------------
// views, re-exported so one import builds any graph
// ---------------------------------------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category views
 */
export const view = Tensor.view

/**
 * @since 0.1.0
 * @category views
 */
export const reshape = Tensor.reshape

/**
 * @since 0.1.0
 * @category views
 */
export const permute = Tensor.permute

/**
 * @since 0.1.0
 * @category views
 */
export const transpose = Tensor.transpose
