/**
 * Devices (ggml's backend device): what a provider registers. A device describes itself, offers its
 * buffer types, says which ops it can run and which it wants offloaded, and makes backends and events.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import * as Backend from "./Backend.js"
import type * as Buffer from "./Buffer.js"
import type { BufferType } from "./BufferType.js"
import type { Interpreter } from "./Command.js"
import * as Event from "./Event.js"
import type { AllocationError, BackendError } from "./GpuError.js"
import { Released } from "./GpuError.js"
import type { Graph } from "./Graph.js"
import type * as Ledger from "./Ledger.js"
import type { Tensor } from "./Tensor.js"
import * as TensorModule from "./Tensor.js"

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
  /**
   * flash_attn_ext over a prompt's many query rows runs as one fused kernel that outruns the unfused chain
   * (mul_mat, soft_max, mul_mat), as llama.cpp's flash attention `auto` asks of a device; where false, a
   * model's prompts take the chain
   */
  readonly fusedAttention: boolean
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
export interface Device extends Backend.DeviceInfo {
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
  /** wraps host bytes (an ArrayBuffer, a file's contents) as a buffer of this device */
  readonly bufferFromHost: (
    bytes: Uint8Array,
    options?: { readonly usage?: Buffer.Usage }
  ) => Effect.Effect<Buffer.Buffer, AllocationError | BackendError, Scope.Scope>
  readonly supportsOp: (t: Tensor) => boolean
  /** whether this device's backends can compute on memory of that buffer type */
  readonly supportsBufferType: (memory: Buffer.Memory) => boolean
  /** should this op run here even though its weights live in host memory (ggml's offload_op) */
  readonly offloadOp: (t: Tensor) => boolean
  readonly makeBackend: (options?: BackendOptions) => Effect.Effect<Backend.Backend, Released, Scope.Scope>
  readonly makeEvent: Effect.Effect<Event.Event, Released, Scope.Scope>
  /** whether the provider that made the device has closed it (its layer's scope closed) */
  readonly released: boolean
  /** live buffers, events and backends of this device */
  readonly ledger: Ledger.Ledger
}

/**
 * @since 0.1.0
 * @category refinements
 */
export const isDevice = (u: unknown): u is Device => Predicate.hasProperty(u, TypeId)

/**
 * ggml's batch size of an op, for offload decisions: the columns of a matrix product (ne[1]), the
 * tokens of rope (ne[2]), none for get_rows (a lookup never pays for moving its table), else the rows.
 *
 * @since 0.1.0
 * @category getters
 */
export const batchSize = (t: Tensor): number => {
  switch (t.op._tag) {
    case "MulMat":
    case "MulMatAdd":
    case "MulMatSwiglu":
    case "MulMatStack":
      return t.ne[1]
    case "MulMatPermuted":
      return t.src[1].ne[1]
    case "Rope":
      return t.ne[2]
    case "GetRows":
      return 0
    default:
      return TensorModule.nrows(t)
  }
}

/**
 * What a provider gives to build a device: its facts, its memory, its kernel layer and its answers
 * about ops. Everything else a Device offers (memory figures, backends, events) `make` builds on these.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  readonly name: string
  readonly description: string
  readonly type: DeviceType
  /** default: asynchronous, events, buffers from host memory, no pinned host buffer type */
  readonly caps?: Caps
  /** the device's account of buffers, bytes, events and backends */
  readonly ledger: Ledger.Ledger
  /** the preferred buffer type for tensors of this device */
  readonly bufferType: BufferType
  /** the device's other buffer types */
  readonly otherBufferTypes?: ReadonlyArray<BufferType>
  readonly bufferFromHost: Device["bufferFromHost"]
  /** the kernel layer every backend of the device runs its commands on */
  readonly interpreter: Interpreter
  readonly supportsOp: (t: Tensor) => boolean
  /** default: memory of this device of the same host-ness as `bufferType` */
  readonly supportsBufferType?: (memory: Buffer.Memory) => boolean
  /**
   * ggml's op_offload_min_batch_size: ops this device supports whose batch (`batchSize`) is at least
   * this large are worth running here even with their weights in host memory; default: never offload
   */
  readonly offloadMinBatch?: number
  /** a rewrite of graphs (fusions) the device's backends compute faster */
  readonly optimize?: (graph: Graph) => Graph
  /** the default of `BackendOptions.leafBuffer` for this device's backends */
  readonly leafBuffer: boolean
}

const released = new WeakSet<Device>()

/**
 * Marks a device closed by its provider (when the layer that opened it closes): making backends and
 * events on it then fails with Released.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const markReleased = (device: Device): Effect.Effect<void> => Effect.sync(() => released.add(device))

/**
 * Builds a device from a provider's primitives.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: MakeOptions): Device => {
  const alive = (operation: string): Effect.Effect<void, Released> =>
    Effect.suspend(() =>
      released.has(device)
        ? Effect.fail(new Released({ resource: `device ${options.name}`, operation }))
        : Effect.void
    )
  const { interpreter, ledger, name } = options
  const memory = Effect.sync((): Memory => ({ free: ledger.free(), total: ledger.totalMemory }))
  const minBatch = options.offloadMinBatch
  // the device's buffer types refuse to allocate once the device is closed
  const guarded = (bt: BufferType): BufferType => ({
    ...bt,
    allocate: (size, allocOptions) => Effect.zipRight(alive("allocate"), bt.allocate(size, allocOptions))
  })
  const bufferType = guarded(options.bufferType)
  const caps = options.caps ??
    { async: true, hostBuffer: false, bufferFromHostPtr: true, events: true, fusedAttention: false }
  const device: Device = {
    [TypeId]: TypeId,
    name,
    description: options.description,
    type: options.type,
    caps,
    memory,
    props: Effect.map(memory, (memory) => ({
      name,
      description: options.description,
      type: options.type,
      memory,
      caps
    })),
    bufferType,
    bufferTypes: [bufferType, ...(options.otherBufferTypes ?? []).map(guarded)],
    bufferFromHost: (bytes, bufferOptions) =>
      Effect.zipRight(alive("bufferFromHost"), options.bufferFromHost(bytes, bufferOptions)),
    supportsOp: options.supportsOp,
    supportsBufferType: options.supportsBufferType ??
      ((memory) => memory.device === name && memory.isHost === bufferType.isHost),
    offloadOp: minBatch === undefined
      ? () => false
      : (t) => TensorModule.nelements(t) > 0 && batchSize(t) >= minBatch && options.supportsOp(t),
    makeBackend: (backendOptions) =>
      Effect.zipRight(
        alive("makeBackend"),
        Backend.make({
          name: backendOptions?.name ?? name,
          device,
          interpreter,
          ledger,
          leafBuffer: backendOptions?.leafBuffer ?? options.leafBuffer,
          ...(options.optimize === undefined ? {} : { optimize: options.optimize })
        })
      ),
    makeEvent: Effect.zipRight(alive("makeEvent"), Event.make(name, ledger)),
    get released() {
      return released.has(device)
    },
    ledger
  }
  return device
}
