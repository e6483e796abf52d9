/**
 * Tensors in ggml's layout: up to 4 dimensions, `ne[i]` elements along dimension i (ne[0] fastest) and
 * `nb[i]` bytes between neighbours along it. A tensor is a node of a graph: it names its op and sources.
 * Views share the memory of `viewSrc` at `viewOffset` bytes, with ggml's stride arithmetic.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Predicate from "effect/Predicate"
import * as DType from "./DType.js"
import { ShapeError } from "./GpuError.js"
import { Op } from "./Op.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/Tensor")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * @since 0.1.0
 * @category models
 */
export type Shape = readonly [number, number, number, number]

/**
 * ggml's tensor flags.
 *
 * @since 0.1.0
 * @category models
 */
export const Flags = { input: 1, output: 2, param: 4 } as const

/**
 * @since 0.1.0
 * @category models
 */
export interface Tensor {
  readonly [TypeId]: TypeId
  /** unique in the process; also the creation order */
  readonly id: number
  readonly name: string
  readonly dtype: DType.DType
  readonly ne: Shape
  /** strides in bytes */
  readonly nb: Shape
  readonly op: Op
  readonly src: ReadonlyArray<Tensor>
  /** the tensor that owns the memory of this view (never itself a view) */
  readonly viewSrc: Tensor | undefined
  /** byte offset of this view inside `viewSrc` */
  readonly viewOffset: number
  /** input / output / param bits; graphs set `output` */
  readonly flags: number
}

/**
 * A tensor, or an effect that builds one: op builders take either, so calls nest.
 *
 * @since 0.1.0
 * @category models
 */
export type TensorLike = Tensor | Effect.Effect<Tensor, ShapeError>

let nextId = 0

class TensorImpl implements Tensor {
  readonly [TypeId]: TypeId = TypeId
  readonly id = nextId++
  constructor(
    readonly name: string,
    readonly dtype: DType.DType,
    readonly ne: Shape,
    readonly nb: Shape,
    readonly op: Op,
    readonly src: ReadonlyArray<Tensor>,
    readonly viewSrc: Tensor | undefined,
    readonly viewOffset: number,
    public flags: number
  ) {}
  toString(): string {
    return `Tensor(${this.name || `#${this.id}`}: ${this.dtype}[${this.ne.join(", ")}])`
  }
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isTensor = (u: unknown): u is Tensor => Predicate.hasProperty(u, TypeId)

/**
 * Contiguous strides for a shape (ggml_new_tensor).
 *
 * @since 0.1.0
 * @category constructors
 */
export const contiguousStrides = (dtype: DType.DType, ne: Shape): Shape => {
  const nb0 = DType.typeSize(dtype)
  const nb1 = (nb0 * ne[0]) / DType.blockSize(dtype)
  const nb2 = nb1 * ne[1]
  const nb3 = nb2 * ne[2]
  return [nb0, nb1, nb2, nb3]
}

/** @internal */
export class ShapeFailure {
  constructor(readonly error: ShapeError) {}
}

/** @internal */
export const fail = (op: string, operands: ReadonlyArray<Tensor>, reason: string): never => {
  throw new ShapeFailure(
    new ShapeError({ op, shapes: operands.map((t) => [...t.ne]), dtypes: operands.map((t) => t.dtype), reason })
  )
}

/**
 * @internal: an effect that runs `self` once and gives that outcome on every later run: a builder's
 * effect makes one tensor however often it is yielded, so an effect can be reused like the value it makes
 */
export const once = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E> => {
  let outcome: Exit.Exit<A, E> | undefined
  return Effect.suspend(() =>
    outcome ?? Effect.flatMap(Effect.exit(self), (exit) => {
      outcome = exit
      return exit
    })
  )
}

/** @internal */
export const guard = <A>(thunk: () => A): Effect.Effect<A, ShapeError> =>
  once(Effect.suspend(() => {
    try {
      return Effect.succeed(thunk())
    } catch (e) {
      if (e instanceof ShapeFailure) return Effect.fail(e.error)
      throw e
    }
  }))

/** @internal */
export const resolve = (t: TensorLike): Effect.Effect<Tensor, ShapeError> => isTensor(t) ? Effect.succeed(t) : t

/** @internal: lifts a throwing builder of one tensor argument */
export const lift1 =
  <P extends ReadonlyArray<unknown>>(impl: (a: Tensor, ...p: P) => Tensor) =>
  (a: TensorLike, ...p: P): Effect.Effect<Tensor, ShapeError> =>
    isTensor(a) ? guard(() => impl(a, ...p)) : once(Effect.flatMap(a, (a) => guard(() => impl(a, ...p))))

/** @internal: lifts a throwing builder of two tensor arguments */
export const lift2 =
  <P extends ReadonlyArray<unknown>>(impl: (a: Tensor, b: Tensor, ...p: P) => Tensor) =>
  (a: TensorLike, b: TensorLike, ...p: P): Effect.Effect<Tensor, ShapeError> =>
    isTensor(a) && isTensor(b)
      ? guard(() => impl(a, b, ...p))
      : once(Effect.flatMap(Effect.all([resolve(a), resolve(b)]), ([a, b]) => guard(() => impl(a, b, ...p))))

/** @internal: lifts a throwing builder of any number of tensor arguments */
export const liftN =
  (impl: (ts: ReadonlyArray<Tensor>) => Tensor) => (ts: ReadonlyArray<TensorLike>): Effect.Effect<Tensor, ShapeError> =>
    once(Effect.flatMap(Effect.all(ts.map(resolve)), (ts) => guard(() => impl(ts))))

/** @internal: lifts a throwing builder of three tensor arguments */
export const lift3 =
  (impl: (a: Tensor, b: Tensor, c: Tensor) => Tensor) =>
  (a: TensorLike, b: TensorLike, c: TensorLike): Effect.Effect<Tensor, ShapeError> =>
    once(Effect.flatMap(Effect.all([resolve(a), resolve(b), resolve(c)]), ([a, b, c]) => guard(() => impl(a, b, c))))

const checkShape = (op: string, ne: ReadonlyArray<number>, dtype: DType.DType): Shape => {
  if (!DType.isDType(dtype)) {
    throw new ShapeFailure(new ShapeError({ op, shapes: [[...ne]], dtypes: [String(dtype)], reason: "unknown dtype" }))
  }
  if (ne.length < 1 || ne.length > 4 || ne.some((n) => !Number.isSafeInteger(n) || n < 0)) {
    throw new ShapeFailure(
      new ShapeError({
        op,
        shapes: [[...ne]],
        dtypes: [dtype],
        reason: "a shape has 1 to 4 dimensions of non-negative integers"
      })
    )
  }
  const shape: Shape = [ne[0], ne[1] ?? 1, ne[2] ?? 1, ne[3] ?? 1]
  if (shape[0] % DType.blockSize(dtype) !== 0) {
    throw new ShapeFailure(
      new ShapeError({
        op,
        shapes: [[...shape]],
        dtypes: [dtype],
        reason: `ne[0] must be a multiple of ${dtype}'s block size ${DType.blockSize(dtype)}`
      })
    )
  }
  return shape
}

/** @internal: a new tensor owning its memory */
export const unsafeMake = (
  name: string,
  dtype: DType.DType,
  ne: Shape,
  op: Op,
  src: ReadonlyArray<Tensor>,
  flags = 0
): Tensor => new TensorImpl(name, dtype, ne, contiguousStrides(dtype, ne), op, src, undefined, 0, flags)

/** @internal: a view of `base` (its memory owner is resolved here) */
export const unsafeView = (
  base: Tensor,
  ne: Shape,
  nb: Shape,
  offset: number,
  op: Op,
  src: ReadonlyArray<Tensor>,
  dtype: DType.DType = base.dtype
): Tensor =>
  new TensorImpl(
    base.name ? `${base.name} (${op._tag.toLowerCase()})` : "",
    dtype,
    ne,
    nb,
    op,
    src,
    base.viewSrc ?? base,
    base.viewOffset + offset,
    0
  )

/** @internal */
export const setFlag = (t: Tensor, flag: number): void => {
  ;(t as TensorImpl).flags |= flag
}

/**
 * A leaf tensor (no op). `ne` may have 1 to 4 dimensions; missing ones are 1.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  name: string,
  dtype: DType.DType,
  ne: ReadonlyArray<number>,
  options?: { readonly flags?: number }
): Effect.Effect<Tensor, ShapeError> =>
  guard(() => unsafeMake(name, dtype, checkShape("new_tensor", ne, dtype), Op.None(), [], options?.flags ?? 0))

/**
 * @since 0.1.0
 * @category getters
 */
export const nelements = (t: Tensor): number => t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]

/**
 * @since 0.1.0
 * @category getters
 */
export const nrows = (t: Tensor): number => t.ne[1] * t.ne[2] * t.ne[3]

/**
 * Bytes spanned by the tensor, strides included (ggml_nbytes).
 *
 * @since 0.1.0
 * @category getters
 */
export const nbytes = (t: Tensor): number => {
  if (t.ne.some((n) => n === 0)) return 0
  const bs = DType.blockSize(t.dtype)
  let bytes = bs === 1 ? DType.typeSize(t.dtype) : (t.ne[0] * t.nb[0]) / bs
  for (let i = bs === 1 ? 0 : 1; i < 4; i++) bytes += (t.ne[i] - 1) * t.nb[i]
  return bytes
}

/**
 * Rows are packed and dimensions follow each other (ggml_is_contiguous; dimensions of size 1 are free).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isContiguous = (t: Tensor): boolean => {
  let next = DType.typeSize(t.dtype)
  for (let i = 0; i < 4; i++) {
    if (t.ne[i] !== 1) {
      if (t.nb[i] !== next) return false
      next *= i === 0 ? t.ne[0] / DType.blockSize(t.dtype) : t.ne[i]
    }
  }
  return true
}

/**
 * Each row (dimension 0) is packed, whatever the higher strides.
 *
 * @since 0.1.0
 * @category predicates
 */
export const hasContiguousRows = (t: Tensor): boolean => t.ne[0] === 1 || t.nb[0] === DType.typeSize(t.dtype)

/**
 * @since 0.1.0
 * @category predicates
 */
export const isView = (t: Tensor): boolean => t.viewSrc !== undefined

/**
 * @since 0.1.0
 * @category predicates
 */
export const sameShape = (a: Tensor, b: Tensor): boolean =>
  a.ne[0] === b.ne[0] && a.ne[1] === b.ne[1] && a.ne[2] === b.ne[2] && a.ne[3] === b.ne[3]

/**
 * Same type, shape and strides (ggml_are_same_layout).
 *
 * @since 0.1.0
 * @category predicates
 */
export const sameLayout = (a: Tensor, b: Tensor): boolean =>
  a.dtype === b.dtype && sameShape(a, b) && a.nb[0] === b.nb[0] && a.nb[1] === b.nb[1] && a.nb[2] === b.nb[2] &&
  a.nb[3] === b.nb[3]

/**
 * `b` tiles `a`: every dimension of `a` is a multiple of `b`'s (ggml_can_repeat(b, a)); an empty `b`
 * tiles only an empty `a`.
 *
 * @since 0.1.0
 * @category predicates
 */
export const canRepeat = (b: Tensor, a: Tensor): boolean =>
  nelements(b) === 0
    ? nelements(a) === 0
    : a.ne[0] % b.ne[0] === 0 && a.ne[1] % b.ne[1] === 0 && a.ne[2] % b.ne[2] === 0 && a.ne[3] % b.ne[3] === 0

/**
 * Byte offset of element (i0, i1, i2, i3) from the start of the tensor's memory owner.
 *
 * @since 0.1.0
 * @category getters
 */
export const byteOffset = (t: Tensor, i0: number, i1: number, i2: number, i3: number): number =>
  t.viewOffset + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3]

// ---------------------------------------------------------------------------------------------------------------
// views
// ---------------------------------------------------------------------------------------------------------------

const viewImpl = (
  a: Tensor,
  ne: ReadonlyArray<number>,
  strides: ReadonlyArray<number>,
  offset: number
): Tensor => {
  const shape = checkShape("view", ne, a.dtype)
  const nb: Shape = [a.nb[0], strides[0] ?? a.nb[1], strides[1] ?? a.nb[2], strides[2] ?? a.nb[3]]
  if (!Number.isSafeInteger(offset) || offset < 0 || nb.some((s) => !Number.isSafeInteger(s) || s < 0)) {
    return fail("view", [a], "offset and strides must be non-negative integers")
  }
  const v = unsafeView(a, shape, nb, offset, Op.View(), [a])
  const owner = a.viewSrc ?? a
  if (nbytes(v) > 0 && v.viewOffset + nbytes(v) > nbytes(owner)) {
    return fail(
      "view",
      [a],
      `a view of ${nbytes(v)} bytes at offset ${v.viewOffset} exceeds the ${nbytes(owner)} bytes of its source`
    )
  }
  return v
}

/**
 * A strided view of `a` (ggml_view_1d..4d): `ne` up to 4 dimensions, byte strides `nb1..nb3` (defaults:
 * `a`'s), `offset` in bytes from `a`'s start. It must stay inside the memory `a` views.
 *
 * @since 0.1.0
 * @category views
 */
export const view: (
  a: TensorLike,
  ne: ReadonlyArray<number>,
  nb: ReadonlyArray<number>,
  offset: number
) => Effect.Effect<Tensor, ShapeError> = lift1(viewImpl)

const reshapeImpl = (a: Tensor, ne: ReadonlyArray<number>): Tensor => {
  const shape = checkShape("reshape", ne, a.dtype)
  if (!isContiguous(a)) return fail("reshape", [a], "reshape needs a contiguous tensor")
  if (shape[0] * shape[1] * shape[2] * shape[3] !== nelements(a)) {
    return fail("reshape", [a], `cannot reshape ${nelements(a)} elements to [${shape.join(", ")}]`)
  }
  return unsafeView(a, shape, contiguousStrides(a.dtype, shape), 0, Op.Reshape(), [a])
}

/**
 * The same contiguous memory with another shape (ggml_reshape).
 *
 * @since 0.1.0
 * @category views
 */
export const reshape: (a: TensorLike, ne: ReadonlyArray<number>) => Effect.Effect<Tensor, ShapeError> = lift1(
  reshapeImpl
)

const permuteImpl = (a: Tensor, axes: ReadonlyArray<number>): Tensor => {
  if (axes.length !== 4 || [...axes].sort().join() !== "0,1,2,3") {
    return fail("permute", [a], `axes [${axes.join(", ")}] are not a permutation of [0, 1, 2, 3]`)
  }
  const ne = [0, 0, 0, 0]
  const nb = [0, 0, 0, 0]
  for (let i = 0; i < 4; i++) {
    ne[axes[i]] = a.ne[i]
    nb[axes[i]] = a.nb[i]
  }
  return unsafeView(
    a,
    ne as unknown as Shape,
    nb as unknown as Shape,
    0,
    Op.Permute({ axes: [axes[0], axes[1], axes[2], axes[3]] }),
    [a]
  )
}

/**
 * ggml_permute: source dimension i moves to position `axes[i]`.
 *
 * @since 0.1.0
 * @category views
 */
export const permute: (a: TensorLike, axes: ReadonlyArray<number>) => Effect.Effect<Tensor, ShapeError> = lift1(
  permuteImpl
)

/**
 * Swaps dimensions 0 and 1 (a view).
 *
 * @since 0.1.0
 * @category views
 */
export const transpose: (a: TensorLike) => Effect.Effect<Tensor, ShapeError> = lift1((a) =>
  unsafeView(a, [a.ne[1], a.ne[0], a.ne[2], a.ne[3]], [a.nb[1], a.nb[0], a.nb[2], a.nb[3]], 0, Op.Transpose(), [a])
)

/**
 * A contiguous copy of any view (ggml_cont).
 *
 * @since 0.1.0
 * @category views
 */
export const cont: (a: TensorLike) => Effect.Effect<Tensor, ShapeError> = lift1((a) =>
  unsafeMake("", a.dtype, a.ne, Op.Cont(), [a])
)
