/**
 * The op builders: each checks ggml's shape and type rules and returns the result tensor, or fails with
 * a `ShapeError` naming the op and the operands. Arguments may be tensors or effects that build them,
 * so calls nest: `Ops.softMax(Ops.mulMat(a, b))`.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as DType from "./DType.js"
import type { ShapeError } from "./GpuError.js"
import type { GluKind, RopeMode, UnaryKind } from "./Op.js"
import { Op } from "./Op.js"
import type { Shape, TensorLike } from "./Tensor.js"
import * as Tensor from "./Tensor.js"

type Built = Effect.Effect<Tensor.Tensor, ShapeError>

const isFloat = (t: Tensor.Tensor) => t.dtype === "f32" || t.dtype === "f16"

const requireFloat = (op: string, ...ts: Array<Tensor.Tensor>) => {
  for (const t of ts) {
    if (!isFloat(t)) Tensor.fail(op, ts, `expects f32 or f16 operands, got ${t.dtype}`)
  }
}

const requireContiguousRows = (op: string, t: Tensor.Tensor) => {
  if (!Tensor.hasContiguousRows(t)) Tensor.fail(op, [t], "expects rows (dimension 0) to be contiguous")
}

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
export const checkMulMat = (a: Tensor.Tensor, b: Tensor.Tensor): Shape => {
  requireFloat("mul_mat", a, b)
  if (a.ne[0] !== b.ne[0]) Tensor.fail("mul_mat", [a, b], "src0 and src1 need the same ne[0] (the shared dimension K)")
  if (b.ne[2] % a.ne[2] !== 0 || b.ne[3] % a.ne[3] !== 0) {
    Tensor.fail("mul_mat", [a, b], "src0's batch dimensions must divide src1's (ne[2], ne[3])")
  }
  if (a.nb[0] > a.nb[1] && a.ne[1] > 1 && a.ne[0] > 1) {
    Tensor.fail("mul_mat", [a, b], "src0 must not be transposed (make it contiguous first)")
  }
  return [a.ne[1], b.ne[1], b.ne[2], b.ne[3]]
}

/**
 * y[i, j] = sum_k a[k, i] * b[k, j] for each batch; a's batch dimensions broadcast over b's (ggml_mul_mat).
 * The result is f32.
 *
 * @since 0.1.0
 * @category matrix
 */
export const mulMat: (a: TensorLike, b: TensorLike) => Built = Tensor.lift2((a, b) =>
  Tensor.unsafeMake("", "f32", checkMulMat(a, b), Op.MulMat(), [a, b])
)

// ---------------------------------------------------------------------------------------------------------------
// normalization
// ---------------------------------------------------------------------------------------------------------------

/**
 * softmax(a * scale + slope * mask) over each row; the mask (f32 or f16) has a's ne[0], at least a's rows,
 * and broadcasts over dimensions 2 and 3. `maxBias` > 0 gives ALiBi slopes per head (dimension 2).
 *
 * @since 0.1.0
 * @category normalization
 */
export const softMax = (
  a: TensorLike,
  options?: { readonly mask?: TensorLike | undefined; readonly scale?: number; readonly maxBias?: number }
): Built => {
  const scale = options?.scale ?? 1
  const maxBias = options?.maxBias ?? 0
  const op = Op.SoftMax({ scale, maxBias })
  if (options?.mask === undefined) {
    return Tensor.lift1((a: Tensor.Tensor) => {
      requireFloat("soft_max", a)
      requireContiguousRows("soft_max", a)
      return Tensor.unsafeMake("", a.dtype, a.ne, op, [a])
    })(a)
  }
  return Tensor.lift2((a: Tensor.Tensor, m: Tensor.Tensor) => {
    requireFloat("soft_max", a, m)
    requireContiguousRows("soft_max", a)
    if (!Tensor.isContiguous(m)) Tensor.fail("soft_max", [a, m], "the mask must be contiguous")
    if (m.ne[0] !== a.ne[0] || m.ne[1] < a.ne[1] || a.ne[2] % m.ne[2] !== 0 || a.ne[3] % m.ne[3] !== 0) {
      Tensor.fail(
        "soft_max",
        [a, m],
        "the mask needs a's ne[0], at least a's ne[1] rows, and dims 2, 3 that divide a's"
      )
    }
    return Tensor.unsafeMake("", a.dtype, a.ne, op, [a, m])
  })(a, options.mask)
}

const norm = (kind: "rms_norm" | "norm") => (a: TensorLike, eps: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    requireFloat(kind, a)
    requireContiguousRows(kind, a)
    if (!(eps >= 0)) Tensor.fail(kind, [a], `eps must be >= 0, got ${eps}`)
    return Tensor.unsafeMake("", a.dtype, a.ne, kind === "norm" ? Op.Norm({ eps }) : Op.RmsNorm({ eps }), [a])
  })(a)

/**
 * x / sqrt(mean(x^2) + eps) over each row.
 *
 * @since 0.1.0
 * @category normalization
 */
export const rmsNorm: (a: TensorLike, eps: number) => Built = norm("rms_norm")

/**
 * (x - mean) / sqrt(var + eps) over each row.
 *
 * @since 0.1.0
 * @category normalization
 */
export const normalize: (a: TensorLike, eps: number) => Built = norm("norm")

/**
 * Rotary position embedding. `pos` is i32 with one position per a.ne[2]. Mode 0 rotates adjacent pairs,
 * mode 2 (neox) rotates (i, i + nDims/2); only the first `nDims` of each row rotate.
 *
 * @since 0.1.0
 * @category normalization
 */
export const rope = (
  a: TensorLike,
  pos: TensorLike,
  options: {
    readonly nDims: number
    readonly mode?: RopeMode
    readonly freqBase?: number
    readonly freqScale?: number
  }
): Built =>
  Tensor.lift2((a: Tensor.Tensor, p: Tensor.Tensor) => {
    const { nDims } = options
    const mode = options.mode ?? 0
    requireFloat("rope", a)
    if (p.dtype !== "i32") Tensor.fail("rope", [a, p], "positions must be i32")
    if (p.ne[0] !== a.ne[2] || Tensor.nelements(p) !== p.ne[0]) {
      Tensor.fail("rope", [a, p], "positions must be a vector with one entry per a.ne[2]")
    }
    if (!Number.isInteger(nDims) || nDims <= 0 || nDims % 2 !== 0 || nDims > a.ne[0]) {
      Tensor.fail("rope", [a, p], `nDims ${nDims} must be even, positive and at most ne[0]`)
    }
    if (mode !== 0 && mode !== 2) Tensor.fail("rope", [a, p], `mode ${mode} is not 0 (normal) or 2 (neox)`)
    return Tensor.unsafeMake(
      "",
      a.dtype,
      a.ne,
      Op.Rope({ nDims, mode, freqBase: options.freqBase ?? 10000, freqScale: options.freqScale ?? 1 }),
      [a, p]
    )
  })(a, pos)

// ---------------------------------------------------------------------------------------------------------------
// rows
// ---------------------------------------------------------------------------------------------------------------

/**
 * Rows of `a` picked by the i32 indices `idx` ([n, a.ne[2], a.ne[3]]); the result is f32 (i32 for i32).
 *
 * @since 0.1.0
 * @category rows
 */
export const getRows: (a: TensorLike, idx: TensorLike) => Built = Tensor.lift2((a, idx) => {
  if (idx.dtype !== "i32") Tensor.fail("get_rows", [a, idx], "indices must be i32")
  if (a.dtype !== "f32" && a.dtype !== "f16" && a.dtype !== "i32") {
    Tensor.fail("get_rows", [a, idx], "rows must be f32, f16 or i32")
  }
  if (a.ne[2] !== idx.ne[1] || a.ne[3] !== idx.ne[2] || idx.ne[3] !== 1) {
    Tensor.fail("get_rows", [a, idx], "indices must be [n, a.ne[2], a.ne[3]]")
  }
  requireContiguousRows("get_rows", a)
  return Tensor.unsafeMake(
    "",
    a.dtype === "i32" ? "i32" : "f32",
    [a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]],
    Op.GetRows(),
    [
      a,
      idx
    ]
  )
})

/**
 * Writes row i of `src` into row idx[i] of `dst`, converting to dst's type; the result is a view of `dst`
 * (ggml_set_rows: the write lands in dst's memory).
 *
 * @since 0.1.0
 * @category rows
 */
export const setRows: (dst: TensorLike, src: TensorLike, idx: TensorLike) => Built = Tensor.lift3(
  (d: Tensor.Tensor, s: Tensor.Tensor, i: Tensor.Tensor) => {
    if (i.dtype !== "i32") Tensor.fail("set_rows", [d, s, i], "indices must be i32")
    if (s.dtype !== "f32" && s.dtype !== "f16") Tensor.fail("set_rows", [d, s, i], "src must be f32 or f16")
    if (d.dtype !== "f32" && d.dtype !== "f16") Tensor.fail("set_rows", [d, s, i], "dst must be f32 or f16")
    if (d.ne[0] !== s.ne[0] || d.ne[2] !== s.ne[2] || d.ne[3] !== s.ne[3]) {
      Tensor.fail("set_rows", [d, s, i], "dst and src need the same ne[0], ne[2], ne[3]")
    }
    if (s.ne[1] !== i.ne[0] || s.ne[2] % i.ne[1] !== 0 || s.ne[3] % i.ne[2] !== 0 || i.ne[3] !== 1) {
      Tensor.fail("set_rows", [d, s, i], "indices must be [src.ne[1], a divisor of src.ne[2], a divisor of src.ne[3]]")
    }
    requireContiguousRows("set_rows", d)
    requireContiguousRows("set_rows", s)
    return Tensor.unsafeView(d, d.ne, d.nb, 0, Op.SetRows(), [d, s, i])
  }
)

// ---------------------------------------------------------------------------------------------------------------
// copies
// ---------------------------------------------------------------------------------------------------------------

/**
 * A contiguous copy converted to `dtype` (f32 <-> f16, or the same type).
 *
 * @since 0.1.0
 * @category copies
 */
export const cpy = (a: TensorLike, dtype: DType.DType): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (!DType.isDType(dtype) || !DType.isComputable(dtype)) Tensor.fail("cpy", [a], `cannot convert to ${dtype}`)
    if (a.dtype !== dtype && !(isFloat(a) && (dtype === "f32" || dtype === "f16"))) {
      Tensor.fail("cpy", [a], `cannot convert ${a.dtype} to ${dtype}`)
    }
    return Tensor.unsafeMake("", dtype, a.ne, Op.Cpy({ dtype }), [a])
  })(a)

/**
 * A contiguous copy of the same type (ggml_dup).
 *
 * @since 0.1.0
 * @category copies
 */
export const dup = (a: TensorLike): Built =>
  Tensor.lift1((a: Tensor.Tensor) => Tensor.unsafeMake("", a.dtype, a.ne, Op.Cpy({ dtype: a.dtype }), [a]))(a)

/**
 * @since 0.1.0
 * @category copies
 */
export const cont: (a: TensorLike) => Built = Tensor.cont

// ---------------------------------------------------------------------------------------------------------------
// reductions and sorting
// ---------------------------------------------------------------------------------------------------------------

const reduce = (op: Op, name: string, shape: (a: Tensor.Tensor) => Shape) =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (a.dtype !== "f32") Tensor.fail(name, [a], "expects f32")
    return Tensor.unsafeMake("", "f32", shape(a), op, [a])
  })

/**
 * Sum of each row: [1, ne1, ne2, ne3].
 *
 * @since 0.1.0
 * @category reductions
 */
export const sumRows: (a: TensorLike) => Built = reduce(Op.SumRows(), "sum_rows", (a) => [1, a.ne[1], a.ne[2], a.ne[3]])

/**
 * Sum of all elements: [1, 1, 1, 1].
 *
 * @since 0.1.0
 * @category reductions
 */
export const sum: (a: TensorLike) => Built = reduce(Op.Sum(), "sum", () => [1, 1, 1, 1])

/**
 * Mean of each row: [1, ne1, ne2, ne3].
 *
 * @since 0.1.0
 * @category reductions
 */
export const mean: (a: TensorLike) => Built = reduce(Op.Mean(), "mean", (a) => [1, a.ne[1], a.ne[2], a.ne[3]])

/**
 * Running sum along each row.
 *
 * @since 0.1.0
 * @category reductions
 */
export const cumsum: (a: TensorLike) => Built = reduce(Op.Cumsum(), "cumsum", (a) => a.ne)

/**
 * Index of the largest element of each row of a matrix: i32 [ne1].
 *
 * @since 0.1.0
 * @category sorting
 */
export const argmax: (a: TensorLike) => Built = Tensor.lift1((a) => {
  if (a.dtype !== "f32") Tensor.fail("argmax", [a], "expects f32")
  if (a.ne[2] !== 1 || a.ne[3] !== 1) Tensor.fail("argmax", [a], "expects a matrix (ne[2] = ne[3] = 1)")
  return Tensor.unsafeMake("", "i32", [a.ne[1], 1, 1, 1], Op.Argmax(), [a])
})

/**
 * Indices that sort each row: i32, same shape.
 *
 * @since 0.1.0
 * @category sorting
 */
export const argsort = (a: TensorLike, order: "asc" | "desc" = "asc"): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (a.dtype !== "f32") Tensor.fail("argsort", [a], "expects f32")
    if (order !== "asc" && order !== "desc") Tensor.fail("argsort", [a], `order ${order} is not asc or desc`)
    return Tensor.unsafeMake("", "i32", a.ne, Op.Argsort({ order }), [a])
  })(a)

/**
 * Indices of the k largest elements of each row, in any order: i32 [k, ne1, ne2, ne3].
 *
 * @since 0.1.0
 * @category sorting
 */
export const topK = (a: TensorLike, k: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (a.dtype !== "f32") Tensor.fail("top_k", [a], "expects f32")
    if (!Number.isInteger(k) || k < 1 || k > a.ne[0]) Tensor.fail("top_k", [a], `k = ${k} must be in [1, ne[0]]`)
    return Tensor.unsafeMake("", "i32", [k, a.ne[1], a.ne[2], a.ne[3]], Op.TopK({ k }), [a])
  })(a)

// ---------------------------------------------------------------------------------------------------------------
// shape
// ---------------------------------------------------------------------------------------------------------------

/**
 * a and b joined along `dim`; the other dimensions must match.
 *
 * @since 0.1.0
 * @category shape
 */
export const concat = (a: TensorLike, b: TensorLike, dim: number): Built =>
  Tensor.lift2((a: Tensor.Tensor, b: Tensor.Tensor) => {
    if (!Number.isInteger(dim) || dim < 0 || dim > 3) Tensor.fail("concat", [a, b], `dim ${dim} is not in [0, 3]`)
    if (a.dtype !== b.dtype) Tensor.fail("concat", [a, b], "operands need the same dtype")
    for (let i = 0; i < 4; i++) {
      if (i !== dim && a.ne[i] !== b.ne[i]) Tensor.fail("concat", [a, b], `dimension ${i} differs`)
    }
    const ne = [...a.ne] as unknown as [number, number, number, number]
    ne[dim] = a.ne[dim] + b.ne[dim]
    return Tensor.unsafeMake("", a.dtype, ne, Op.Concat({ dim }), [a, b])
  })(a, b)

/**
 * Zeros appended at the end of each dimension.
 *
 * @since 0.1.0
 * @category shape
 */
export const pad = (a: TensorLike, p: readonly [number, number, number, number]): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    if (a.dtype !== "f32") Tensor.fail("pad", [a], "expects f32")
    if (p.length !== 4 || p.some((x) => !Number.isInteger(x) || x < 0)) {
      Tensor.fail("pad", [a], "padding is 4 non-negative integers")
    }
    return Tensor.unsafeMake(
      "",
      a.dtype,
      [a.ne[0] + p[0], a.ne[1] + p[1], a.ne[2] + p[2], a.ne[3] + p[3]],
      Op.Pad({ p: [p[0], p[1], p[2], p[3]] }),
      [a]
    )
  })(a)

/**
 * `a` tiled to the shape of `shape` (each of its dimensions a multiple of a's).
 *
 * @since 0.1.0
 * @category shape
 */
export const repeat: (a: TensorLike, shape: TensorLike) => Built = Tensor.lift2((a, shape) => {
  if (!Tensor.canRepeat(a, shape)) {
    Tensor.fail("repeat", [a, shape], "each dimension of the target must be a multiple of a's")
  }
  return Tensor.unsafeMake("", a.dtype, shape.ne, Op.Repeat(), [a, shape])
})

/**
 * Sets a[i, j] to -inf where i > j + nPast (a causal mask).
 *
 * @since 0.1.0
 * @category shape
 */
export const diagMaskInf = (a: TensorLike, nPast: number): Built =>
  Tensor.lift1((a: Tensor.Tensor) => {
    requireFloat("diag_mask_inf", a)
    if (!Number.isInteger(nPast) || nPast < 0) Tensor.fail("diag_mask_inf", [a], `n_past ${nPast} must be >= 0`)
    return Tensor.unsafeMake("", a.dtype, a.ne, Op.DiagMaskInf({ nPast }), [a])
  })(a)

// ---------------------------------------------------------------------------------------------------------------
// gated linear units
// ---------------------------------------------------------------------------------------------------------------

/**
 * act(first half of each row) * second half (halves exchanged when `swapped`); with `gate`, act(a) * gate.
 *
 * @since 0.1.0
 * @category gated
 */
export const glu = (
  a: TensorLike,
  kind: GluKind,
  options?: { readonly gate?: TensorLike | undefined; readonly swapped?: boolean }
): Built => {
  const swapped = options?.swapped ?? false
  if (kind !== "swiglu" && kind !== "geglu") {
    return Tensor.lift1((a: Tensor.Tensor) => Tensor.fail("glu", [a], `unknown kind ${kind}`))(a)
  }
  if (options?.gate === undefined) {
    return Tensor.lift1((a: Tensor.Tensor) => {
      requireFloat("glu", a)
      requireContiguousRows("glu", a)
      if (a.ne[0] % 2 !== 0) Tensor.fail("glu", [a], "a single-tensor glu needs an even ne[0]")
      return Tensor.unsafeMake("", a.dtype, [a.ne[0] / 2, a.ne[1], a.ne[2], a.ne[3]], Op.Glu({ kind, swapped }), [a])
    })(a)
  }
  return Tensor.lift2((a: Tensor.Tensor, g: Tensor.Tensor) => {
    requireFloat("glu", a, g)
    requireContiguousRows("glu", a)
    requireContiguousRows("glu", g)
    if (!Tensor.sameShape(a, g) || a.dtype !== g.dtype) {
      Tensor.fail("glu", [a, g], "a and gate need the same shape and type")
    }
    return Tensor.unsafeMake("", a.dtype, a.ne, Op.Glu({ kind, swapped }), [a, g])
  })(a, options.gate)
}

/**
 * silu(a) * gate, or on the halves of a.
 *
 * @since 0.1.0
 * @category gated
 */
export const swiglu = (a: TensorLike, gate?: TensorLike): Built => glu(a, "swiglu", { gate })

/**
 * gelu(a) * gate, or on the halves of a.
 *
 * @since 0.1.0
 * @category gated
 */
export const geglu = (a: TensorLike, gate?: TensorLike): Built => glu(a, "geglu", { gate })

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
