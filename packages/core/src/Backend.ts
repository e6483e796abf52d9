/**
 * Backends: a stream of work on a device (ggml's backend). Every operation is a command (see `Command`)
 * that the device's interpreter carries out in arrival order (a fair lock, in the caller's fiber), so
 * copies, computes and events keep ggml's ordering; what runs asynchronously is the device's own
 * timeline (GPU queues), which `synchronize` and events wait for. `compute` returns once its graph is
 * handed to the device; interrupting it is ggml's abort callback: the interpreter stops at the next node
 * or chunk, work in flight finishes, and the backend stays usable.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import * as Buffer from "./Buffer.js"
import type { BufferType } from "./BufferType.js"
import type { ComputeOptions, Interpreter } from "./Command.js"
import { Command } from "./Command.js"
import * as Event from "./Event.js"
import type { BackendError, DeviceLost } from "./GpuError.js"
import { AllocationError, OutOfBounds, Released, UnsupportedOp } from "./GpuError.js"
import * as Graph from "./Graph.js"
import * as GraphAllocator from "./GraphAllocator.js"
import type * as Ledger from "./Ledger.js"
import * as Metrics from "./Metrics.js"
import * as Op from "./Op.js"
import * as Plan from "./Plan.js"
import * as Tensor from "./Tensor.js"
import type { Trace } from "./Trace.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/Backend")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * @since 0.1.0
 * @category models
 */
export interface AllocateOptions {
  /** tensors (weights) that live in buffers of their own */
  readonly bindings?: ReadonlyArray<Plan.Binding>
  /**
   * The graph's leafs (inputs, weights, constants) not bound elsewhere go into a second buffer of the
   * plan instead of the compute buffer. Kernels only read them (set_rows into a cache is the exception,
   * and binds that buffer read_write), so a GPU backend binds them read-only, where they would otherwise
   * share a read_write binding with the results, which runs products faster on GPUs
   * (benchmarks/RESULTS.md, "leaf buffer"). The cost is small: inputs and
   * weights are pinned for the plan's life either way; only other leafs (tensors made without
   * `input`/`param`) lose the reuse of their memory for intermediates after their last use. Default:
   * the backend's (`Device.BackendOptions.leafBuffer`, else on for WebGPU, off for the CPU).
   */
  readonly leafBuffer?: boolean
}

/**
 * What a backend knows of its device: its name, its memory and its answers about ops, the facts a
 * scheduler places nodes by. Every `Device` is one (a device also makes backends and events, which is
 * why the backend holds only these).
 *
 * @since 0.1.0
 * @category models
 */
export interface DeviceInfo {
  readonly name: string
  /** the preferred buffer type for tensors of this device */
  readonly bufferType: BufferType
  readonly supportsOp: (t: Tensor.Tensor) => boolean
  /** whether this device's backends can compute on memory of that buffer type */
  readonly supportsBufferType: (memory: Buffer.Memory) => boolean
  /** should this op run here even though its weights live in host memory (ggml's offload_op) */
  readonly offloadOp: (t: Tensor.Tensor) => boolean
  /** live buffers, events and backends of this device */
  readonly ledger: Ledger.Ledger
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Backend {
  readonly [TypeId]: TypeId
  readonly id: number
  readonly name: string
  readonly device: DeviceInfo
  /** enqueues a write of `data` at `offset` bytes into the tensor at `dst` */
  readonly setAsync: (
    dst: Plan.Location,
    data: Uint8Array,
    offset?: number
  ) => Effect.Effect<void, OutOfBounds | Released>
  /**
   * enqueues a read; the returned effect waits for the bytes. A failure of work queued before it that
   * nobody awaited fails the read (its bytes would be that work's) instead of waiting for a synchronize
   */
  readonly getAsync: (
    src: Plan.Location,
    offset?: number,
    size?: number
  ) => Effect.Effect<Effect.Effect<Uint8Array, BackendError>, OutOfBounds | Released>
  /**
   * Enqueues a copy of a tensor's bytes into `dst` (same byte size). With `from`, the copy waits for
   * the work queued on that backend first (ggml's cpy_tensor_async between backends): by an event, or
   * out of another device's GPU memory (the bytes come through the host) by reading them in `from`'s turn.
   */
  readonly copyAsync: (
    src: Plan.Location,
    dst: Plan.Location,
    from?: Backend
  ) => Effect.Effect<void, OutOfBounds | Released>
  /** waits until all queued work has finished; reports a failure of work nobody awaited (nor a read saw) */
  readonly synchronize: Effect.Effect<void, BackendError>
  /**
   * places a graph's tensors in one compute buffer (scoped); a tensor larger than one buffer of the device
   * can hold fails with AllocationError before anything is allocated
   */
  readonly allocate: (
    graph: Graph.Graph | Graph.Builder,
    options?: AllocateOptions
  ) => Effect.Effect<Plan.Plan, AllocationError | UnsupportedOp | DeviceLost | Released, Scope.Scope>
  /**
   * computes the plan and returns once its results are ready; interruption aborts it: work not yet handed
   * to the device is dropped, work in flight (bounded by the device's chunking) finishes, and the backend
   * stays usable
   */
  readonly compute: (plan: Plan.Plan, options?: ComputeOptions) => Effect.Effect<void, BackendError>
  /** hands a compute to the device and returns without waiting for it; failures surface at `synchronize` */
  readonly computeAsync: (plan: Plan.Plan, options?: ComputeOptions) => Effect.Effect<void, UnsupportedOp | Released>
  /** a rewrite of the graph this backend computes faster (fusions); same results */
  readonly optimize: (graph: Graph.Graph) => Graph.Graph
  /** records `event` at the current end of this backend's queue (ggml_backend_event_record) */
  readonly recordEvent: (event: Event.Event) => Effect.Effect<void, Released>
  /** makes this backend's later commands wait for the event's last record (ggml_backend_event_wait) */
  readonly waitEvent: (event: Event.Event) => Effect.Effect<void, Released>
  /** the next compute records a trace; the returned effect waits for it */
  readonly captureNext: Effect.Effect<Effect.Effect<Trace>>
}

let nextId = 0

/**
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  readonly name: string
  readonly device: DeviceInfo
  readonly interpreter: Interpreter
  readonly ledger: Ledger.Ledger
  readonly optimize?: (graph: Graph.Graph) => Graph.Graph
  /** where plans put their leafs unless `AllocateOptions.leafBuffer` says: in a buffer of their own when true */
  readonly leafBuffer?: boolean
}

/**
 * The span of an operation on the per-token path (compute, synchronize): recorded and ended like any
 * other, but not made the parent of what runs inside (nothing there opens spans), which halves its cost
 * (bench/probes/effect-cost.ts).
 */
const hotSpan =
  (name: string, attributes?: Record<string, unknown>) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.useSpan(
      name,
      attributes === undefined ? { captureStackTrace: false } : { captureStackTrace: false, attributes },
      () => self
    )

/**
 * Builds a backend over a device's interpreter: ordering, events, capture, and allocation of plans.
 * Closing the scope waits for the device to finish what it was given.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: MakeOptions): Effect.Effect<Backend, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { device, interpreter } = options
    const scope = yield* Effect.scope
    // commands run in the caller's fiber, one at a time in arrival order: a fair semaphore gives ggml's
    // stream ordering without a worker fiber (a hand-off between fibers costs tens of microseconds)
    const lock = yield* Effect.makeSemaphore(1)
    let lost: DeviceLost | undefined
    let pendingError: BackendError | undefined
    let captureRequest: Deferred.Deferred<Trace> | undefined
    // events this backend must wait for before its next command (ggml's event_wait)
    const waits: Array<Deferred.Deferred<void, BackendError>> = []

    const execute = (command: Command): Effect.Effect<unknown, BackendError> => {
      switch (command._tag) {
        case "RecordEvent":
          // the fence resolves when the device finishes; later commands go on meanwhile
          return interpreter.fence.pipe(
            Effect.exit,
            Effect.flatMap((exit) => Deferred.done(command.done, exit)),
            Effect.interruptible,
            Effect.forkIn(scope),
            Effect.asVoid
          )
        case "WaitEvent":
          return Effect.sync(() => {
            waits.push(command.on)
          })
        case "Synchronize":
          return Effect.flatMap(interpreter.fence, () => {
            const e = pendingError
            pendingError = undefined
            return e === undefined ? Effect.void : Effect.fail(e)
          })
        case "CopyTensor":
          if (
            command.src.bufferType.device !== interpreter.device &&
            !Buffer.sameQueue(command.src.bufferType, device.bufferType)
          ) {
            return Effect.flatMap(
              command.src.get(command.srcOffset, command.size),
              (data) => interpreter.execute(Command.SetTensor({ buffer: command.dst, offset: command.dstOffset, data }))
            )
          }
          return interpreter.execute(command)
        default:
          return interpreter.execute(command)
      }
    }

    /**
     * a read in its turn: queued where the interpreter can (its wait left to the reader, outside the lock),
     * else carried out there. Work before it that failed unawaited fails it instead (its bytes would be
     * that work's): a reader that never synchronizes (greedy decoding a step ahead) still sees the failure
     */
    const queueRead = (command: Command): Effect.Effect<Effect.Effect<Uint8Array, BackendError>, BackendError> => {
      const failed = pendingError
      if (failed !== undefined) {
        pendingError = undefined
        return Effect.fail(failed)
      }
      return command._tag === "GetTensor" && interpreter.queueRead !== undefined
        ? interpreter.queueRead(command)
        : Effect.map(execute(command) as Effect.Effect<Uint8Array, BackendError>, Effect.succeed)
    }

    /** waits for the events this backend was told to wait for, in order */
    const drainWaits: Effect.Effect<void> = Effect.suspend(() =>
      waits.length === 0 ? Effect.void : Effect.zipRight(Effect.ignore(Deferred.await(waits.shift()!)), drainWaits)
    )

    /** runs a command in order; a detached one reports its failure at the next synchronize instead */
    const run = <A = unknown>(
      command: Command,
      detached: boolean,
      how: (command: Command) => Effect.Effect<A, BackendError> = execute as never
    ): Effect.Effect<A, BackendError> => {
      // written without generators: this is the path of every compute and synchronize
      // built under the lock: what a command does depends on the state it finds when its turn comes
      const executed = Effect.catchAll(Effect.suspend(() => how(command)), (e) => {
        if (e._tag === "DeviceLost") lost = e
        if (!detached) return Effect.fail(e)
        pendingError ??= e
        return Effect.succeed(undefined as A)
      })
      return lock.withPermits(1)(Effect.suspend(() => {
        interpreter.observe?.(command)
        if (lost !== undefined) return Effect.fail(lost)
        return waits.length > 0 && command._tag !== "WaitEvent" ? Effect.zipRight(drainWaits, executed) : executed
      }))
    }

    /**
     * a command nobody awaits (carried out by `how` where given): its failure waits for the next synchronize
     * or read
     */
    const detach = (
      command: Command,
      how?: (command: Command) => Effect.Effect<unknown, BackendError>
    ): Effect.Effect<void> =>
      run(command, true, how).pipe(
        Effect.asVoid,
        Effect.catchAll((e) =>
          Effect.sync(() => {
            pendingError ??= e
          })
        )
      )

    options.ledger.addBackend(1)
    // set when the backend's scope closes: every later use fails at once with Released
    let released = false
    // let submitted work finish before the scope's other resources go, bounded in time
    yield* Effect.addFinalizer(() =>
      run(Command.Synchronize(), false).pipe(
        Effect.ignore,
        Effect.timeoutOption("10 seconds"),
        Effect.ensuring(Effect.sync(() => {
          released = true
          options.ledger.addBackend(-1)
        }))
      )
    )
    const alive = (operation: string): Effect.Effect<void, Released> =>
      Effect.suspend(() =>
        released ? Effect.fail(new Released({ resource: `backend ${options.name}`, operation })) : Effect.void
      )

    const checkTensorRange = (loc: Plan.Location, offset: number, size: number) =>
      Buffer.checkRange(loc.tensor.name || `tensor #${loc.tensor.id}`, offset, size, Tensor.nbytes(loc.tensor))

    /** a plan whose memory this device cannot use, as the error its compute fails with */
    const planError = (plan: Plan.Plan): UnsupportedOp | undefined =>
      device.supportsBufferType(plan.buffer.bufferType)
        ? undefined
        : new UnsupportedOp({
          op: "compute",
          dtypes: [],
          device: device.name,
          reason: `the plan's memory is in ${plan.buffer.bufferType.name}, which ${device.name} cannot use`
        })

    const computeCommand = (
      plan: Plan.Plan,
      computeOptions: ComputeOptions | undefined,
      abort: { aborted: boolean },
      wait: boolean
    ) => {
      const capture = captureRequest
      captureRequest = undefined
      return {
        capture,
        command: Command.Compute({ plan, options: computeOptions ?? {}, abort, capture: capture !== undefined, wait })
      }
    }

    /** why a compute of `plan` cannot run here now, if it cannot */
    const computeError = (plan: Plan.Plan, operation: string): Released | UnsupportedOp | undefined =>
      released
        ? new Released({ resource: `backend ${options.name}`, operation })
        : plan.released
        ? new Released({ resource: "the plan", operation })
        : planError(plan)

    /** the tensors of a graph too large for one buffer of `bufferType`, as the allocation error they give */
    const oversized = (g: Graph.Graph, bufferType: BufferType): AllocationError | undefined => {
      for (const t of [...g.leafs, ...g.nodes]) {
        if (t.viewSrc !== undefined) continue
        const bytes = bufferType.allocSize(t)
        if (bytes > bufferType.maxSize) {
          return new AllocationError({
            bufferType: bufferType.name,
            requested: bytes,
            available: bufferType.maxSize,
            reason: `${t.name || `tensor #${t.id}`} (${Op.name(t.op)}, ${t.dtype}[${t.ne.join(", ")}]) needs ` +
              `${bytes} bytes, more than one buffer of ${device.name} holds (${bufferType.maxSize})`
          })
        }
      }
      return undefined
    }

    // plans move their bytes through this backend's queue
    const transfer: Plan.Transfer = {
      write: (dst, data) => self.setAsync(dst, data),
      read: (src) => Effect.flatten(self.getAsync(src))
    }

    const self: Backend = {
      [TypeId]: TypeId,
      id: nextId++,
      name: options.name,
      device,
      setAsync: (dst, data, offset = 0) =>
        alive("setAsync").pipe(
          Effect.zipRight(Buffer.checkAlive(dst.buffer, "setAsync")),
          Effect.zipRight(checkTensorRange(dst, offset, data.byteLength)),
          // copied: the caller may reuse its array at once, as ggml's set_tensor_async allows
          Effect.zipRight(
            detach(Command.SetTensor({ buffer: dst.buffer, offset: dst.offset + offset, data: data.slice() }))
          ),
          // on the per-token path (a token's ids each step): the cheap span
          hotSpan("Backend.setAsync", { device: device.name, bytes: data.byteLength })
        ),
      getAsync: (src, offset = 0, size) => {
        const n = size ?? Tensor.nbytes(src.tensor) - offset
        // the read is ordered now; the returned effect hands over its bytes (or its failure)
        return alive("getAsync").pipe(
          Effect.zipRight(Buffer.checkAlive(src.buffer, "getAsync")),
          Effect.zipRight(checkTensorRange(src, offset, n)),
          Effect.zipRight(
            Effect.exit(
              run(Command.GetTensor({ buffer: src.buffer, offset: src.offset + offset, size: n }), false, queueRead)
            )
          ),
          Effect.map((exit) => Exit.isSuccess(exit) ? exit.value : Effect.failCause(exit.cause))
        )
      },
      copyAsync: (src, dst, from) =>
        Effect.gen(function*() {
          yield* alive("copyAsync")
          yield* Buffer.checkAlive(src.buffer, "copyAsync")
          yield* Buffer.checkAlive(dst.buffer, "copyAsync")
          const size = Tensor.nbytes(src.tensor)
          if (size !== Tensor.nbytes(dst.tensor)) {
            return yield* new OutOfBounds({
              target: dst.tensor.name || `tensor #${dst.tensor.id}`,
              offset: 0,
              size,
              limit: Tensor.nbytes(dst.tensor)
            })
          }
          const copy = Command.CopyTensor({
            src: src.buffer,
            srcOffset: src.offset,
            dst: dst.buffer,
            dstOffset: dst.offset,
            size
          })
          // devices on one queue (virtual devices of one GPU): the copy is submitted after the source's work,
          // so it neither waits for an event nor goes through the host
          if (from !== undefined && from !== self && Buffer.sameQueue(src.buffer.bufferType, device.bufferType)) {
            return yield* detach(copy)
          }
          if (
            from !== undefined && from !== self && !src.buffer.bufferType.isHost &&
            src.buffer.bufferType.device !== device.name
          ) {
            // a GPU's memory read by another device comes through the host anyway: read in the source
            // backend's turn (after the work that writes it), written in ours once the bytes come. The read
            // orders the copy, so no event waits for the source's queue first (a wait costs a round trip)
            const bytes = yield* from.getAsync(src)
            return yield* detach(copy, () =>
              Effect.flatMap(
                bytes,
                (data) => interpreter.execute(Command.SetTensor({ buffer: dst.buffer, offset: dst.offset, data }))
              ))
          }
          if (from !== undefined && from !== self) {
            const ev = Event.unsafeMake(from.device.name)
            yield* from.recordEvent(ev)
            yield* self.waitEvent(ev)
          }
          yield* detach(copy)
        }).pipe(
          // on the per-token path where a scheduler splits a graph: the cheap span
          hotSpan("Backend.copyAsync", {
            device: device.name,
            from: from?.device.name ?? device.name,
            bytes: Tensor.nbytes(src.tensor)
          })
        ),
      synchronize: Effect.zipRight(alive("synchronize"), run(Command.Synchronize(), false)).pipe(
        Effect.asVoid,
        hotSpan("Backend.synchronize")
      ),
      // Effect.fn: a span and the caller's site in failures' traces, twice useSpan's cost and nothing against
      // an allocation (benchmarks/RESULTS.md, choices: Effect)
      allocate: Effect.fn("Backend.allocate", { attributes: { device: device.name } })(
        function*(graph: Graph.Graph | Graph.Builder, allocOptions?: AllocateOptions) {
          yield* alive("allocate")
          const g = Graph.from(graph)
          const tooLarge = oversized(g, device.bufferType)
          if (tooLarge !== undefined) return yield* tooLarge
          for (const n of g.nodes) {
            if (!Op.isView(n.op) && !device.supportsOp(n)) {
              return yield* new UnsupportedOp({
                op: Op.name(n.op),
                dtypes: [n.dtype, ...n.src.map((s) => s.dtype)],
                device: device.name
              })
            }
          }
          const bufferType = device.bufferType
          const bindings = [...(allocOptions?.bindings ?? [])]
          if (allocOptions?.leafBuffer ?? (options.leafBuffer === true)) {
            const bound = new Set(bindings.map((b) => b.tensor.id))
            const leafs = g.leafs.filter((t) => t.viewSrc === undefined && !bound.has(t.id))
            bindings.push(...yield* Plan.bind(bufferType, leafs, { usage: "compute" }))
          }
          const external = new Set(bindings.map((b) => b.tensor.id))
          const layout = GraphAllocator.plan(g, {
            alignment: bufferType.alignment,
            allocSize: bufferType.allocSize,
            external: (t) => external.has(t.id)
          })
          const buffer = yield* bufferType.allocate(layout.size, { usage: "compute" })
          const plan = Plan.make({ graph: g, buffer, layout, bindings, transfer })
          yield* Effect.annotateCurrentSpan({
            "graph.nodes": g.nodes.length,
            "graph.leafs": g.leafs.length,
            "plan.id": plan.id,
            // the compute buffer and the buffers bound here (leafs); bindings given by the caller are theirs
            "bytes": layout.size +
              [...new Set(bindings.slice(allocOptions?.bindings?.length ?? 0).map((b) => b.buffer))]
                .reduce((s, b) => s + b.size, 0)
          })
          return plan
        }
      ),
      compute: (plan, computeOptions) =>
        Effect.suspend(() => {
          const started = performance.now()
          const unusable = computeError(plan, "compute")
          if (unusable !== undefined) return Effect.fail(unusable)
          const abort = { aborted: false }
          const { capture, command } = computeCommand(plan, computeOptions, abort, true)
          // interruption (ggml's abort) stops the interpreter at its next node or chunk; work already
          // submitted is waited for before the interruption completes
          const ran = run(command, false).pipe(
            Effect.onInterrupt(() =>
              Effect.sync(() => {
                abort.aborted = true
              }).pipe(Effect.zipRight(Effect.ignore(interpreter.fence)))
            ),
            Effect.tap(() => Metrics.recordCompute(device.name, performance.now() - started))
          )
          return capture === undefined
            ? Effect.asVoid(ran)
            : Effect.flatMap(
              ran,
              (result) => result === undefined ? Effect.void : Deferred.succeed(capture, result as Trace)
            )
        }).pipe(
          hotSpan("Backend.compute", {
            device: device.name,
            "plan.id": plan.id,
            "graph.nodes": plan.graph.nodes.length
          })
        ),
      computeAsync: (plan, computeOptions) =>
        Effect.gen(function*() {
          const unusable = computeError(plan, "computeAsync")
          if (unusable !== undefined) return yield* unusable
          const { capture, command } = computeCommand(plan, computeOptions, { aborted: false }, false)
          if (capture === undefined) return yield* detach(command)
          const trace = yield* Effect.exit(run(command, false))
          if (Exit.isSuccess(trace) && trace.value !== undefined) yield* Deferred.succeed(capture, trace.value as Trace)
          else if (Exit.isFailure(trace)) {
            yield* detach(Command.Synchronize()).pipe(Effect.zipRight(Effect.sync(() => {
              pendingError ??= Option.getOrUndefined(Cause.failureOption(trace.cause))
            })))
          }
        }),
      optimize: options.optimize ?? ((g) => g),
      recordEvent: (event) =>
        alive("recordEvent").pipe(
          Effect.zipRight(Event.checkAlive(event, "recordEvent")),
          Effect.zipRight(Event.record(event)),
          Effect.flatMap((done) => detach(Command.RecordEvent({ eventId: event.id, done })))
        ),
      waitEvent: (event) =>
        alive("waitEvent").pipe(
          Effect.zipRight(Event.checkAlive(event, "waitEvent")),
          Effect.zipRight(Effect.suspend(() => {
            const on = Event.lastRecord(event)
            return on === undefined ? Effect.void : detach(Command.WaitEvent({ eventId: event.id, on }))
          }))
        ),
      captureNext: Effect.gen(function*() {
        const d = yield* Deferred.make<Trace>()
        captureRequest = d
        return Deferred.await(d)
      })
    }
    return self
  })

/**
 * @since 0.1.0
 * @category refinements
 */
export const isBackend = (u: unknown): u is Backend => Predicate.hasProperty(u, TypeId)
