/**
 * An allocated graph: one compute buffer holding every tensor at the offset the graph allocator chose,
 * plus any tensors bound to buffers of their own (weights). `set` and `get` move data through the queue
 * of the backend that made the plan, so they are ordered with computes.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type { Buffer } from "./Buffer.js"
import type { BufferType } from "./BufferType.js"
import type { AllocationError, BackendError, DeviceLost, OutOfBounds } from "./GpuError.js"
import { ShapeError } from "./GpuError.js"
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
  readonly graph: Graph
  /** the compute buffer */
  readonly buffer: Buffer
  readonly layout: GraphAllocator.Plan
  /** the memory of a tensor of the graph (views resolve to their owner), or undefined */
  readonly location: (t: Tensor.Tensor) => Location | undefined
  /** writes host data into a tensor (numbers are converted to its dtype) */
  readonly set: (
    t: Tensor.Tensor,
    data: TensorData.HostData
  ) => Effect.Effect<void, ShapeError | OutOfBounds | BackendError>
  /** reads a tensor back, views gathered element by element */
  readonly get: (t: Tensor.Tensor) => Effect.Effect<TensorData.HostArray, ShapeError | OutOfBounds | BackendError>
}

const notInPlan = (op: string, t: Tensor.Tensor) =>
  new ShapeError({
    op,
    shapes: [[...t.ne]],
    dtypes: [t.dtype],
    reason: `tensor ${t.name || `#${t.id}`} is not part of this plan`
  })

/**
 * How a plan moves bytes: the queue of the backend that made it (`Backend.setAsync` / `getAsync`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Transfer {
  readonly write: (dst: Location, data: Uint8Array) => Effect.Effect<void, OutOfBounds>
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
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: MakeOptions): Plan => {
  const { bindings, buffer, graph, layout, transfer } = options
  const bound = new Map(bindings.map((b) => [b.tensor.id, b]))
  const members = new Set<number>([...graph.nodes, ...graph.leafs].map((t) => t.id))
  const location = (original: Tensor.Tensor): Location | undefined => {
    const t = GraphNs.resolve(graph, original)
    if (!members.has(t.id)) return undefined
    const owner = t.viewSrc ?? t
    const b = bound.get(owner.id)
    if (b !== undefined) return { tensor: t, buffer: b.buffer, offset: b.offset + t.viewOffset }
    const offset = layout.offsets.get(owner.id)
    return offset === undefined ? undefined : { tensor: t, buffer, offset: offset + t.viewOffset }
  }
  return {
    [TypeId]: TypeId,
    graph,
    buffer,
    layout,
    location,
    set: (t, data) =>
      Effect.suspend((): Effect.Effect<void, ShapeError | OutOfBounds | BackendError> => {
        const loc = location(t)
        if (loc === undefined) return Effect.fail(notInPlan("plan.set", t))
        t = loc.tensor
        if (!Tensor.isContiguous(t)) {
          return Effect.fail(
            new ShapeError({
              op: "plan.set",
              shapes: [[...t.ne]],
              dtypes: [t.dtype],
              reason: "set needs a contiguous tensor"
            })
          )
        }
        const expected = TensorData.expectedLength(t, data)
        if (data.length !== expected) {
          return Effect.fail(
            new ShapeError({
              op: "plan.set",
              shapes: [[...t.ne]],
              dtypes: [t.dtype],
              reason: `expected ${expected} values for ${t.name || `#${t.id}`}, got ${data.length}`
            })
          )
        }
        return transfer.write(loc, TensorData.encode(t.dtype, data))
      }),
    get: (original) =>
      Effect.gen(function*() {
        const loc = location(original)
        if (loc === undefined) return yield* Effect.fail(notInPlan("plan.get", original))
        const t = loc.tensor
        const bytes = yield* transfer.read(loc)
        return Tensor.isContiguous(t) ? TensorData.decode(t.dtype, bytes) : TensorData.gather(t, bytes, t.viewOffset)
      })
  }
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isPlan = (u: unknown): u is Plan => Predicate.hasProperty(u, TypeId)

/**
 * Places tensors back to back in one new buffer of `bufferType`, each at an aligned offset: bindings for
 * `AllocateOptions.bindings` (weights loaded once and shared by plans), or a plan's leafs. The buffer
 * lives as long as the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const bind = (
  bufferType: BufferType,
  tensors: ReadonlyArray<Tensor.Tensor>,
  options?: { readonly usage?: Buffer["usage"] }
): Effect.Effect<Array<Binding>, AllocationError | DeviceLost, Scope.Scope> =>
  Effect.gen(function*() {
    if (tensors.length === 0) return []
    const offsets: Array<number> = []
    let size = 0
    for (const t of tensors) {
      offsets.push(size)
      size += GraphAllocator.slotSize(t, bufferType)
    }
    const buffer = yield* bufferType.allocate(size, { usage: options?.usage ?? "weights" })
    return tensors.map((tensor, i) => ({ tensor, buffer, offset: offsets[i] }))
  })
