/**
 * An allocated graph: one compute buffer holding every tensor at the offset the graph allocator chose,
 * plus any tensors bound to buffers of their own (weights). `set` and `get` move data through the queue
 * of the backend that made the plan, so they are ordered with computes.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type { Buffer } from "./Buffer.js"
import type { BufferType } from "./BufferType.js"
import type { BackendError, DeviceLost } from "./GpuError.js"
import { AllocationError, NotAnOutput, OutOfBounds, Released, ShapeError } from "./GpuError.js"
import type { Graph } from "./Graph.js"
import * as GraphNs from "./Graph.js"
import * as GraphAllocator from "./GraphAllocator.js"
import * as Tensor from "./Tensor.js"
import * as TensorData from "./TensorData.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/Plan")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * Where a tensor's element (0, 0, 0, 0) lives.
 *
 * @since 0.1.0
 * @category models
 */
export interface Location {
  readonly tensor: Tensor.Tensor
  readonly buffer: Buffer
  readonly offset: number
}

/**
 * A tensor placed in a buffer of its own (a weight), outside the compute buffer.
 *
 * @since 0.1.0
 * @category models
 */
export interface Binding {
  readonly tensor: Tensor.Tensor
  readonly buffer: Buffer
  readonly offset: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Plan {
  readonly [TypeId]: TypeId
  /** unique in the process: spans and traces name the plan by it */
  readonly id: number
  readonly graph: Graph
  /** the compute buffer */
  readonly buffer: Buffer
  readonly layout: GraphAllocator.Plan
  /** whether the plan's memory is gone (its scope closed): every use then fails with Released */
  readonly released: boolean
  /** the memory of a tensor of the graph (views resolve to their owner), or undefined */
  readonly location: (t: Tensor.Tensor) => Location | undefined
  /**
   * Writes values into a tensor, converted to its type (`TensorData.HostData`: a quantized tensor takes its
   * raw blocks). Indices of get_rows and set_rows are checked against the rows they pick from.
   */
  readonly set: (
    t: Tensor.Tensor,
    data: TensorData.HostData
  ) => Effect.Effect<void, ShapeError | OutOfBounds | Released>
  /** writes raw bytes (the tensor's type, little-endian, all of it) */
  readonly setBytes: (t: Tensor.Tensor, bytes: Uint8Array) => Effect.Effect<void, ShapeError | OutOfBounds | Released>
  /**
   * Reads a tensor back as values (raw blocks for a quantized one), views gathered element by element.
   * Only tensors whose memory the plan keeps can be read: outputs, inputs, weights; an intermediate fails
   * with NotAnOutput.
   */
  readonly get: (
    t: Tensor.Tensor
  ) => Effect.Effect<TensorData.HostArray, ShapeError | NotAnOutput | OutOfBounds | BackendError>
  /** reads the raw bytes of a contiguous tensor */
  readonly getBytes: (
    t: Tensor.Tensor
  ) => Effect.Effect<Uint8Array, ShapeError | NotAnOutput | OutOfBounds | BackendError>
}

const nameOf = (t: Tensor.Tensor) => t.name || `tensor #${t.id}`

const shapeError = (op: string, t: Tensor.Tensor, reason: string) =>
  new ShapeError({ op, shapes: [[...t.ne]], dtypes: [t.dtype], reason })

/**
 * How a plan moves bytes: the queue of the backend that made it (`Backend.setAsync` / `getAsync`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Transfer {
  readonly write: (dst: Location, data: Uint8Array) => Effect.Effect<void, OutOfBounds | Released>
  readonly read: (src: Location) => Effect.Effect<Uint8Array, OutOfBounds | BackendError>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  readonly graph: Graph
  /** the compute buffer */
  readonly buffer: Buffer
  readonly layout: GraphAllocator.Plan
  readonly bindings: ReadonlyArray<Binding>
  readonly transfer: Transfer
}

/**
 * The index operands of a graph and the rows each may pick: src1 of get_rows, src2 of set_rows, by tensor
 * id (the smallest bound where a tensor indexes several tables).
 */
const indexBounds = (graph: Graph): Map<number, number> => {
  const bounds = new Map<number, number>()
  const add = (idx: Tensor.Tensor, rows: number) => bounds.set(idx.id, Math.min(rows, bounds.get(idx.id) ?? rows))
  for (const n of graph.nodes) {
    if (n.op._tag === "GetRows") add(n.src[1], n.src[0].ne[1])
    else if (n.op._tag === "SetRows") add(n.src[2], n.src[0].ne[1])
    else if (n.op._tag === "RopeSetRows" || n.op._tag === "RopeSetRowsKv") {
      // fused stores (rope_set_rows[_kv]): the indices after rope's sources, the values' table after them
      const at = n.op.hasFreqFactors ? 4 : 3
      add(n.src[at], n.src[0].ne[1])
      if (n.op._tag === "RopeSetRowsKv") add(n.src[at], n.src[at + 1].ne[1])
    }
  }
  return bounds
}

/**
 * Fails with Released when the memory of `plan` is gone.
 *
 * @since 0.1.0
 * @category validation
 */
export const checkAlive = (plan: Plan, operation: string): Effect.Effect<void, Released> =>
  Effect.suspend(() => (plan.released ? Effect.fail(new Released({ resource: "a plan", operation })) : Effect.void))

/** plans made in this process: the next one's id */
let nextId = 0

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: MakeOptions): Plan => {
  const { bindings, buffer, graph, layout, transfer } = options
  const bound = new Map(bindings.map((b) => [b.tensor.id, b]))
  const members = new Set<number>([...graph.nodes, ...graph.leafs].map((t) => t.id))
  const buffers = [buffer, ...new Set(bindings.map((b) => b.buffer))]
  const bounds = indexBounds(graph)
  const location = (original: Tensor.Tensor): Location | undefined => {
    const t = GraphNs.resolve(graph, original)
    if (!members.has(t.id)) return undefined
    const owner = t.viewSrc ?? t
    const b = bound.get(owner.id)
    if (b !== undefined) return { tensor: t, buffer: b.buffer, offset: b.offset + t.viewOffset }
    const offset = layout.offsets.get(owner.id)
    return offset === undefined ? undefined : { tensor: t, buffer, offset: offset + t.viewOffset }
  }
  /** where `t` lives, once the plan is known alive and `t` a member */
  const place = (op: string, t: Tensor.Tensor): Effect.Effect<Location, ShapeError | Released> =>
    Effect.suspend((): Effect.Effect<Location, ShapeError | Released> => {
      const gone = buffers.find((b) => b.released)
      if (gone !== undefined) return Effect.fail(new Released({ resource: `the plan (${gone.name})`, operation: op }))
      const loc = location(t)
      return loc === undefined
        ? Effect.fail(shapeError(op, t, `${nameOf(t)} is not part of this plan`))
        : Effect.succeed(loc)
    })
  const contiguous = (op: string, t: Tensor.Tensor): Effect.Effect<void, ShapeError> =>
    Tensor.isContiguous(t) ? Effect.void : Effect.fail(shapeError(op, t, `${op} needs a contiguous tensor`))
  /** the indices written into an index operand pick existing rows */
  const checkIndices = (t: Tensor.Tensor, data: TensorData.HostData): Effect.Effect<void, OutOfBounds> => {
    const rows = bounds.get(t.id)
    if (rows === undefined) return Effect.void
    for (let i = 0; i < data.length; i++) {
      const r = data[i]
      if (!(r >= 0 && r < rows)) {
        return Effect.fail(
          new OutOfBounds({ target: `${nameOf(t)}[${i}] (an index)`, offset: r, size: 1, limit: rows, unit: "rows" })
        )
      }
    }
    return Effect.void
  }
  /** a read: only of memory the plan keeps for the whole compute */
  const readable = (op: string, t: Tensor.Tensor) =>
    Effect.flatMap(place(op, t), (loc) => {
      const owner = loc.tensor.viewSrc ?? loc.tensor
      return bound.has(owner.id) || layout.kept.has(owner.id)
        ? Effect.succeed(loc)
        : Effect.fail(new NotAnOutput({ tensor: nameOf(t) }))
    })
  const self: Plan = {
    [TypeId]: TypeId,
    id: nextId++,
    graph,
    buffer,
    layout,
    get released() {
      return buffers.some((b) => b.released)
    },
    location,
    set: (t, data) =>
      Effect.gen(function*() {
        const loc = yield* place("plan.set", t)
        yield* contiguous("plan.set", loc.tensor)
        const bytes = TensorData.encode(loc.tensor, data)
        if (Either.isLeft(bytes)) return yield* shapeError("plan.set", loc.tensor, bytes.left)
        yield* checkIndices(loc.tensor, data)
        yield* transfer.write(loc, bytes.right)
      }),
    setBytes: (t, bytes) =>
      Effect.gen(function*() {
        const loc = yield* place("plan.setBytes", t)
        yield* contiguous("plan.setBytes", loc.tensor)
        const n = Tensor.nbytes(loc.tensor)
        if (bytes.byteLength !== n) {
          return yield* shapeError(
            "plan.setBytes",
            loc.tensor,
            `expected ${n} bytes for ${nameOf(t)}, got ${bytes.byteLength}`
          )
        }
        yield* transfer.write(loc, bytes)
      }),
    get: (t) =>
      Effect.gen(function*() {
        const loc = yield* readable("plan.get", t)
        const bytes = yield* transfer.read(loc)
        const v = loc.tensor
        // a read's bytes are new (Primitives.read): decoded in place, not copied again
        return Tensor.isContiguous(v)
          ? TensorData.decode(v.dtype, bytes, true)
          : TensorData.gather(v, bytes, v.viewOffset)
      }),
    getBytes: (t) =>
      Effect.gen(function*() {
        const loc = yield* readable("plan.getBytes", t)
        yield* contiguous("plan.getBytes", loc.tensor)
        return yield* transfer.read(loc)
      })
  }
  return self
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isPlan = (u: unknown): u is Plan => Predicate.hasProperty(u, TypeId)

/**
 * Places tensors back to back in new buffers of `bufferType`, each at an aligned offset, starting a new
 * buffer where the next tensor would pass the type's largest (a model's weights past 2 GiB): bindings
 * for `AllocateOptions.bindings` (weights loaded once and shared by plans), or a plan's leafs. A tensor
 * larger than one buffer fails with AllocationError before anything is allocated. The buffers live as
 * long as the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const bind = (
  bufferType: BufferType,
  tensors: ReadonlyArray<Tensor.Tensor>,
  options?: { readonly usage?: Buffer["usage"] }
): Effect.Effect<Array<Binding>, AllocationError | DeviceLost | Released, Scope.Scope> =>
  Effect.gen(function*() {
    if (tensors.length === 0) return []
    const groups: Array<{ size: number; members: Array<{ tensor: Tensor.Tensor; offset: number }> }> = []
    for (const tensor of tensors) {
      const slot = GraphAllocator.slotSize(tensor, bufferType)
      if (slot > bufferType.maxSize) {
        return yield* new AllocationError({
          bufferType: bufferType.name,
          requested: slot,
          available: bufferType.maxSize,
          reason: `tensor ${tensor.name || `#${tensor.id}`} (${slot} bytes) is larger than one buffer`
        })
      }
      const last = groups[groups.length - 1]
      if (last === undefined || last.size + slot > bufferType.maxSize) {
        groups.push({ size: slot, members: [{ tensor, offset: 0 }] })
      } else {
        last.members.push({ tensor, offset: last.size })
        last.size += slot
      }
    }
    const bindings: Array<Binding> = []
    for (const group of groups) {
      const buffer = yield* bufferType.allocate(group.size, { usage: options?.usage ?? "weights" })
      for (const m of group.members) bindings.push({ tensor: m.tensor, buffer, offset: m.offset })
    }
    return bindings
  })
