/**
 * The command algebra. A backend does not run anything itself: its operations produce these values, and
 * the device's interpreter (its kernel layer) carries them out in order. The WebGPU interpreter encodes
 * and submits, the CPU one computes in TypeScript, a mock records; tests can assert on the stream.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type * as Deferred from "effect/Deferred"
import type * as Effect from "effect/Effect"
import type { Buffer } from "./Buffer.js"
import type { BackendError } from "./GpuError.js"
import type { Plan } from "./Plan.js"
import type { Trace } from "./Trace.js"

/**
 * Set by an interrupted compute; interpreters check it between nodes and stop encoding.
 *
 * @since 0.1.0
 * @category models
 */
export interface AbortFlag {
  aborted: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ComputeOptions {
  /** split the encoding into this many command buffers (ggml's n_cb); default 1 */
  readonly commandBuffers?: number
}

/**
 * @since 0.1.0
 * @category models
 */
export type Command = Data.TaggedEnum<{
  SetTensor: { readonly buffer: Buffer; readonly offset: number; readonly data: Uint8Array }
  GetTensor: { readonly buffer: Buffer; readonly offset: number; readonly size: number }
  CopyTensor: {
    readonly src: Buffer
    readonly srcOffset: number
    readonly dst: Buffer
    readonly dstOffset: number
    readonly size: number
  }
  Memset: { readonly buffer: Buffer; readonly offset: number; readonly size: number; readonly value: number }
  Compute: {
    readonly plan: Plan
    readonly options: ComputeOptions
    readonly abort: AbortFlag
    readonly capture: boolean
    /** carried out once the results are ready (compute), or once the work is handed over (computeAsync) */
    readonly wait: boolean
  }
  /** completes `done` once all work before it has finished on the device */
  RecordEvent: { readonly eventId: number; readonly done: Deferred.Deferred<void, BackendError> }
  /** later commands wait until `on` completes */
  WaitEvent: { readonly eventId: number; readonly on: Deferred.Deferred<void, BackendError> }
  Synchronize: {}
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const Command = Data.taggedEnum<Command>()

/**
 * The commands an interpreter carries out itself; events and synchronization are the backend's.
 *
 * @since 0.1.0
 * @category models
 */
export type DeviceCommand = Extract<Command, { _tag: "SetTensor" | "GetTensor" | "CopyTensor" | "Memset" | "Compute" }>

/**
 * A device's kernel layer.
 *
 * @since 0.1.0
 * @category models
 */
export interface Interpreter {
  /** the device it runs on */
  readonly device: string
  /**
   * Carries out one command: GetTensor yields the bytes, a captured Compute its Trace. A CopyTensor
   * whose source lives on another device is never given: the backend carries such bytes through the host.
   */
  readonly execute: (command: DeviceCommand) => Effect.Effect<Uint8Array | Trace | void, BackendError>
  /**
   * Queues a GetTensor's read and returns the wait for its bytes, which the backend leaves to the reader:
   * commands after the read (a next decoding step) reach the device while it is in flight. Without it,
   * `execute` waits for the bytes in the command's turn.
   */
  readonly queueRead?: (
    command: Extract<DeviceCommand, { _tag: "GetTensor" }>
  ) => Effect.Effect<Effect.Effect<Uint8Array, BackendError>, BackendError>
  /** completes once all work handed to the device so far has finished */
  readonly fence: Effect.Effect<void, BackendError>
  /** sees every command of a backend in order, events and synchronizations included (mocks record) */
  readonly observe?: (command: Command) => void
}
