/**
 * An allocated graph: one compute buffer holding every tensor at the offset the graph allocator chose,
 * plus any tensors bound to buffers of their own (weights). `set` and `get` move data through the
 * backend's queue, so they are ordered with computes.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type { Backend } from "./Backend.js"
import type { Buffer } from "./Buffer.js"
import type { BackendError, OutOfBounds } from "./GpuError.js"
import { ShapeError } from "./GpuError.js"
import type { Graph } from "./Graph.js"
import * as GraphNs from "./Graph.js"
import type * as GraphAllocator from "./GraphAllocator.js"
import type { Tensor } from "./Tensor.js"
import * as T from "./Tensor.js"
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
  readonly tensor: Tensor
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
  readonly tensor: Tensor
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
  readonly backend: Backend
  /** the compute buffer */
  readonly buffer: Buffer
  readonly layout: GraphAllocator.Plan
  /** the memory of a tensor of the graph (views resolve to their owner), or undefined */
  readonly location: (t: Tensor) => Location | undefined
  /** writes host data into a tensor (numbers are converted to its dtype) */
  readonly set: (
    t: Tensor,
    data: TensorData.HostData
  ) => Effect.Effect<void, ShapeError | OutOfBounds | BackendError>
  /** reads a tensor back, views gathered element by element */
  readonly get: (t: Tensor) => Effect.Effect<TensorData.HostArray, ShapeError | OutOfBounds | BackendError>
}

const notInPlan = (op: string, t: Tensor) =>
  new ShapeError({
    op,
    shapes: [[...t.ne]],
    dtypes: [t.dtype],
    reason: `tensor ${t.name || `#${t.id}`} is not part of this plan`
  })

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  graph: Graph,
  backend: Backend,
  buffer: Buffer,
  layout: GraphAllocator.Plan,
  bindings: ReadonlyArray<Binding>
): Plan => {
  const bound = new Map(bindings.map((b) => [b.tensor.id, b]))
  const members = new Set<number>([...graph.nodes, ...graph.leafs].map((t) => t.id))
  const location = (original: Tensor): Location | undefined => {
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
    backend,
    buffer,
    layout,
    location,
    set: (t, data) =>
      Effect.suspend((): Effect.Effect<void, ShapeError | OutOfBounds | BackendError> => {
        const loc = location(t)
        if (loc === undefined) return Effect.fail(notInPlan("plan.set", t))
        t = loc.tensor
        if (!T.isContiguous(t)) {
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
        return backend.setAsync(loc, TensorData.encode(t.dtype, data))
      }),
    get: (original) =>
      Effect.gen(function*() {
        const loc = location(original)
        if (loc === undefined) return yield* Effect.fail(notInPlan("plan.get", original))
        const t = loc.tensor
        const bytes = yield* Effect.flatten(backend.getAsync(loc))
        return T.isContiguous(t) ? TensorData.decode(t.dtype, bytes) : TensorData.gather(t, bytes, t.viewOffset)
      })
  }
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isPlan = (u: unknown): u is Plan => Predicate.hasProperty(u, TypeId)
