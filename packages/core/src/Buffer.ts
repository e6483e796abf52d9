/**
 * Buffers: one allocation of a buffer type. Every method is bounds-checked and returns an Effect; the
 * provider supplies only unchecked primitives (`make`), as ggml's buffer interface does.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type { BackendError } from "./GpuError.js"
import { OutOfBounds, Released } from "./GpuError.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/Buffer")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * What the memory holds, as ggml tags it: weights guide the scheduler, compute buffers hold graphs.
 *
 * @since 0.1.0
 * @category models
 */
export type Usage = "any" | "weights" | "compute"

/**
 * host: plain host memory; shared: device memory with a fast host path; private: device-only;
 * mapped: wraps host bytes the caller gives.
 *
 * @since 0.1.0
 * @category models
 */
export type Kind = "host" | "shared" | "private" | "mapped"

/**
 * What memory a buffer lives in: the facts of its buffer type that a device checks before it uses the
 * buffer (`Device.supportsBufferType`). Every `BufferType` is one.
 *
 * @since 0.1.0
 * @category models
 */
export interface Memory {
  readonly name: string
  /** the device's name */
  readonly device: string
  readonly kind: Kind
  readonly alignment: number
  readonly isHost: boolean
  /**
   * the queue the device submits to, where devices share one (virtual devices of one GPU): work on one
   * queue runs in the order it is submitted, so a copy between memories of one queue needs neither the
   * host nor an event
   */
  readonly queue?: string | undefined
}

/**
 * Whether two memories' devices submit to one queue (`Memory.queue`).
 *
 * @since 0.1.0
 * @category predicates
 */
export const sameQueue = (a: Memory, b: Memory): boolean => a.queue !== undefined && a.queue === b.queue

/**
 * @since 0.1.0
 * @category models
 */
export interface Buffer {
  readonly [TypeId]: TypeId
  readonly id: number
  /** the buffer type's name and this buffer's id */
  readonly name: string
  /** the buffer type it was allocated from */
  readonly bufferType: Memory
  readonly size: number
  readonly usage: Usage
  /** host memory of the buffer, where the buffer type is host memory (the CPU reads it directly) */
  readonly host: Uint8Array | undefined
  /** the provider's handle (a GPUBuffer for WebGPU) */
  readonly native: unknown
  /** whether the scope that allocated the buffer has closed: every operation then fails with Released */
  readonly released: boolean
  /** fills `size` bytes at `offset` with the byte `value` */
  readonly memset: (offset: number, size: number, value: number) => Effect.Effect<void, OutOfBounds | BackendError>
  readonly set: (offset: number, data: Uint8Array) => Effect.Effect<void, OutOfBounds | BackendError>
  readonly get: (offset: number, size: number) => Effect.Effect<Uint8Array, OutOfBounds | BackendError>
  /** copies `size` bytes from `src` (any buffer, any device) into this buffer (ggml's cpy_tensor) */
  readonly copyFrom: (
    src: Buffer,
    srcOffset: number,
    dstOffset: number,
    size: number
  ) => Effect.Effect<void, OutOfBounds | BackendError>
  /** fills the whole buffer with the byte `value` */
  readonly clear: (value: number) => Effect.Effect<void, BackendError>
}

/**
 * The unchecked operations a provider implements.
 *
 * @since 0.1.0
 * @category models
 */
export interface Primitives {
  readonly host?: Uint8Array | undefined
  readonly native?: unknown
  readonly memset: (offset: number, size: number, value: number) => Effect.Effect<void, BackendError>
  readonly write: (offset: number, data: Uint8Array) => Effect.Effect<void, BackendError>
  /** new bytes, the caller's to keep (a view of memory the buffer keeps using would alias it) */
  readonly read: (offset: number, size: number) => Effect.Effect<Uint8Array, BackendError>
  /** a device-side copy; `false` when it cannot copy from that source (then the host carries the bytes) */
  readonly copyFrom?: (
    src: Buffer,
    srcOffset: number,
    dstOffset: number,
    size: number
  ) => Effect.Effect<boolean, BackendError>
}

let nextId = 0

/**
 * Checks that [offset, offset + size) lies in [0, limit).
 *
 * @since 0.1.0
 * @category validation
 */
export const checkRange = (
  target: string,
  offset: number,
  size: number,
  limit: number
): Effect.Effect<void, OutOfBounds> =>
  Number.isSafeInteger(offset) && Number.isSafeInteger(size) && offset >= 0 && size >= 0 && offset + size <= limit
    ? Effect.void
    : Effect.fail(new OutOfBounds({ target, offset, size, limit }))

/**
 * Fails with Released when `buffer`'s scope has closed: `operation` names what was attempted.
 *
 * @since 0.1.0
 * @category validation
 */
export const checkAlive = (buffer: Buffer, operation: string): Effect.Effect<void, Released> =>
  Effect.suspend(() =>
    buffer.released ? Effect.fail(new Released({ resource: `buffer ${buffer.name}`, operation })) : Effect.void
  )

const released = new WeakSet<Buffer>()

/**
 * Marks a buffer released (its buffer type does this when the allocating scope closes).
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const markReleased = (buffer: Buffer): void => {
  released.add(buffer)
}

/**
 * Builds the checked buffer from a provider's primitives.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (bufferType: Memory, size: number, usage: Usage, primitives: Primitives): Buffer => {
  const id = nextId++
  const name = `${bufferType.name}#${id}`
  // every operation checks first that the buffer is alive: its memory may be gone
  const alive = (operation: string) => checkAlive(self, operation)
  const self: Buffer = {
    [TypeId]: TypeId,
    id,
    name,
    bufferType,
    size,
    usage,
    host: primitives.host,
    native: primitives.native,
    get released() {
      return released.has(self)
    },
    memset: (offset, n, value) =>
      alive("buffer.memset").pipe(
        Effect.zipRight(checkRange(name, offset, n, size)),
        Effect.zipRight(n === 0 ? Effect.void : primitives.memset(offset, n, value & 0xff))
      ),
    set: (offset, data) =>
      alive("buffer.set").pipe(
        Effect.zipRight(checkRange(name, offset, data.byteLength, size)),
        Effect.zipRight(data.byteLength === 0 ? Effect.void : primitives.write(offset, data))
      ),
    get: (offset, n) =>
      alive("buffer.get").pipe(
        Effect.zipRight(checkRange(name, offset, n, size)),
        Effect.zipRight(n === 0 ? Effect.succeed(new Uint8Array(0)) : primitives.read(offset, n))
      ),
    copyFrom: (src, srcOffset, dstOffset, n) =>
      Effect.gen(function*() {
        yield* alive("buffer.copyFrom")
        yield* checkAlive(src, "buffer.copyFrom")
        yield* checkRange(src.name, srcOffset, n, src.size)
        yield* checkRange(name, dstOffset, n, size)
        if (n === 0) return
        const done = primitives.copyFrom ? yield* primitives.copyFrom(src, srcOffset, dstOffset, n) : false
        if (!done) yield* Effect.flatMap(src.get(srcOffset, n), (bytes) => primitives.write(dstOffset, bytes))
      }),
    clear: (value) =>
      Effect.zipRight(alive("buffer.clear"), size === 0 ? Effect.void : primitives.memset(0, size, value & 0xff))
  }
  return self
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isBuffer = (u: unknown): u is Buffer => Predicate.hasProperty(u, TypeId)
