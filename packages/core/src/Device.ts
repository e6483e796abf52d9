/**
 * Devices (ggml's backend device): what a provider registers. A device describes itself, offers its
 * buffer types, says which ops it can run and which it wants offloaded, and makes backends and events.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type { Backend } from "./Backend.js"
import type * as Buffer from "./Buffer.js"
import type { BufferType } from "./BufferType.js"
import type { Event } from "./Event.js"
import type { AllocationError, BackendError } from "./GpuError.js"
import type * as Ledger from "./Ledger.js"
import type { Tensor } from "./Tensor.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/Device")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * @since 0.1.0
 * @category models
 */
export type DeviceType = "CPU" | "GPU" | "IGPU" | "ACCEL"

/**
 * @since 0.1.0
 * @category models
 */
export interface Caps {
  /** set/get/copy/compute run asynchronously to the host */
  readonly async: boolean
  /** offers a pinned host buffer type */
  readonly hostBuffer: boolean
  /** can wrap host memory as a buffer (bufferFromHost) */
  readonly bufferFromHostPtr: boolean
  /** events order work between backends */
  readonly events: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Memory {
  readonly free: number
  readonly total: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Props {
  readonly name: string
  readonly description: string
  readonly type: DeviceType
  readonly memory: Memory
  readonly caps: Caps
}

/**
 * @since 0.1.0
 * @category models
 */
export interface BackendOptions {
  /** a name for the backend (for traces and errors) */
  readonly name?: string
  /**
   * whether this backend's plans put the graph's leafs in a buffer of their own unless
   * `AllocateOptions.leafBuffer` says otherwise; absent, the device's choice (on for WebGPU, off for the CPU)
   */
  readonly leafBuffer?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Device {
  readonly [TypeId]: TypeId
  readonly name: string
  readonly description: string
  readonly type: DeviceType
  readonly caps: Caps
  readonly memory: Effect.Effect<Memory>
  readonly props: Effect.Effect<Props>
  /** the preferred buffer type for tensors of this device */
  readonly bufferType: BufferType
  /** every buffer type of the device (e.g. shared, private, mapped) */
  readonly bufferTypes: ReadonlyArray<BufferType>
  /** pinned host memory for fast transfers, where the device has it */
  readonly hostBufferType: Option.Option<BufferType>
  /** wraps host bytes (an ArrayBuffer, a file's contents) as a buffer of this device */
  readonly bufferFromHost: (
    bytes: Uint8Array,
    options?: { readonly usage?: Buffer.Usage }
  ) => Effect.Effect<Buffer.Buffer, AllocationError | BackendError, Scope.Scope>
  readonly supportsOp: (t: Tensor) => boolean
  readonly supportsBufferType: (bufferType: BufferType) => boolean
  /** should this op run here even though its weights live in host memory (ggml's offload_op) */
  readonly offloadOp: (t: Tensor) => boolean
  readonly makeBackend: (options?: BackendOptions) => Effect.Effect<Backend, never, Scope.Scope>
  readonly makeEvent: Effect.Effect<Event, never, Scope.Scope>
  /** live buffers, events and backends of this device */
  readonly ledger: Ledger.Ledger
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isDevice = (u: unknown): u is Device => Predicate.hasProperty(u, TypeId)

/**
 * ggml's batch size of an op, for offload decisions: mul_mat's ne[1], else the rows.
 *
 * @since 0.1.0
 * @category getters
 */
export const batchSize = (t: Tensor): number => t.op._tag === "MulMat" ? t.ne[1] : t.ne[1] * t.ne[2] * t.ne[3]
