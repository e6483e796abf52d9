/**
 * Buffer types: a kind of memory on a device (ggml's buffer type). They say how tensors are aligned,
 * how large one buffer may be, how many bytes a tensor needs, and allocate scoped buffers: a buffer is
 * freed when the scope that allocated it closes, on success, failure or interruption.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import * as Buffer from "./Buffer.js"
import type { BackendError } from "./GpuError.js"
import type { DeviceLost, Released } from "./GpuError.js"
import { AllocationError } from "./GpuError.js"
import type * as Ledger from "./Ledger.js"
import * as Tensor from "./Tensor.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/BufferType")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * @since 0.1.0
 * @category models
 */
export type Kind = Buffer.Kind

/**
 * @since 0.1.0
 * @category models
 */
export interface BufferType extends Buffer.Memory {
  readonly [TypeId]: TypeId
  readonly maxSize: number
  /** bytes to reserve for a tensor (its size, plus any scratch its op needs on this device) */
  readonly allocSize: (t: Tensor.Tensor) => number
  /** fails with AllocationError when refused, DeviceLost when the device is gone, Released once it is closed */
  readonly allocate: (
    size: number,
    options?: { readonly usage?: Buffer.Usage }
  ) => Effect.Effect<Buffer.Buffer, AllocationError | DeviceLost | Released, Scope.Scope>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions extends Buffer.Memory {
  readonly maxSize: number
  readonly ledger: Ledger.Ledger
  readonly allocSize?: (t: Tensor.Tensor) => number
  /** creates the native memory; the bytes are already reserved in the ledger */
  readonly create: (size: number) => Effect.Effect<Buffer.Primitives, AllocationError | BackendError>
  /** frees the native memory; must not fail */
  readonly destroy: (primitives: Buffer.Primitives) => Effect.Effect<void>
}

/**
 * Builds a buffer type that checks sizes against its maximum and the device's memory, counts live
 * buffers in the device's ledger, and frees each buffer when its scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: MakeOptions): BufferType => {
  const self: BufferType = {
    [TypeId]: TypeId,
    name: options.name,
    device: options.device,
    kind: options.kind,
    alignment: options.alignment,
    maxSize: options.maxSize,
    isHost: options.isHost,
    ...(options.queue === undefined ? {} : { queue: options.queue }),
    allocSize: options.allocSize ?? Tensor.nbytes,
    allocate: (size, allocOptions) => {
      const fail = (reason: string, cause?: unknown) =>
        new AllocationError({
          bufferType: options.name,
          requested: size,
          available: Math.min(options.ledger.free(), options.maxSize),
          reason,
          ...(cause === undefined ? {} : { cause })
        })
      if (!Number.isSafeInteger(size) || size < 0) return Effect.fail(fail("the size must be a non-negative integer"))
      if (size > options.maxSize) return Effect.fail(fail(`over the buffer type's maximum of ${options.maxSize} bytes`))
      return Effect.acquireRelease(
        Effect.suspend(() => {
          if (!options.ledger.reserve(size)) {
            return Effect.fail(
              fail(`over the device's free memory (${options.ledger.free()} of ${options.ledger.totalMemory} bytes)`)
            )
          }
          return options.create(size).pipe(
            Effect.mapError((e) => e._tag === "AllocationError" || e._tag === "DeviceLost" ? e : fail(e.message, e)),
            Effect.tapErrorCause(() => Effect.sync(() => options.ledger.release(size))),
            Effect.map((p) => ({ p, buffer: Buffer.make(self, size, allocOptions?.usage ?? "any", p) }))
          )
        }),
        ({ buffer, p }) =>
          Effect.sync(() => Buffer.markReleased(buffer)).pipe(
            Effect.zipRight(options.destroy(p)),
            Effect.ensuring(Effect.sync(() => options.ledger.release(size)))
          )
      ).pipe(Effect.map(({ buffer }) => buffer))
    }
  }
  return self
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isBufferType = (u: unknown): u is BufferType => Predicate.hasProperty(u, TypeId)
