/**
 * A mock GPU for testing Effect programs without one. Its devices behave like real ones (they compute
 * with the CPU reference kernels), record every command for assertions, simulate a memory limit,
 * virtual devices and latency, and inject faults on demand: an allocation failure at the Nth allocation,
 * a device loss at the Nth submit, a kernel error for a named op. Faults are the same typed errors the
 * WebGPU backend produces. Fault counters live in the layer value, so a program that rebuilds the layer
 * after a loss gets a healthy device.
 *
 * @since 0.1.0
 */
import type * as Buffer from "@effect-gpu/core/Buffer"
import * as BufferType from "@effect-gpu/core/BufferType"
import type { Command, Interpreter } from "@effect-gpu/core/Command"
import * as Cpu from "@effect-gpu/core/Cpu"
import * as Device from "@effect-gpu/core/Device"
import { AllocationError, DeviceLost, KernelError } from "@effect-gpu/core/GpuError"
import * as Ledger from "@effect-gpu/core/Ledger"
import * as Op from "@effect-gpu/core/Op"
import * as Registry from "@effect-gpu/core/Registry"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * @since 0.1.0
 * @category models
 */
export interface Faults {
  /** the Nth allocation (1-based, counted over every device and every build of the layer) fails */
  readonly allocationFailsAt?: number
  /** the Nth compute submitted loses the device: it and every later command fail with DeviceLost */
  readonly deviceLostAtSubmit?: number
  /** computes containing this op (ggml name, e.g. "soft_max") fail with KernelError */
  readonly kernelErrorOn?: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** logical devices "Test0".."Test{n-1}"; default 1 */
  readonly devices?: number
  /**
   * the devices submit to one queue, as virtual devices of one GPU (`Buffer.Memory.queue`): copies between
   * them need neither events nor the host; default: a queue each
   */
  readonly sharedQueue?: boolean
  /** bytes each device holds (default 1 GiB) */
  readonly memory?: number
  /** added to every compute (uses the Clock, so TestClock controls it) */
  readonly latency?: Duration.DurationInput
  readonly faults?: Faults
  /**
   * the most bytes one buffer (and so one tensor) may hold, as a GPU's max binding size: WebGPU on lavapipe
   * allows 128 MiB; default 2 GiB. A larger tensor fails allocation with AllocationError, as on WebGPU
   */
  readonly maxBufferSize?: number
  /** the most commands the log keeps (the oldest go first); default 10 000 */
  readonly logLimit?: number
  /** ops the mock devices do not support (by ggml's names, e.g. "soft_max"), as a GPU lacking a kernel */
  readonly unsupported?: ReadonlyArray<string>
}

/**
 * One command as the mock saw it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Recorded {
  readonly device: string
  readonly command: Command["_tag"]
  /** bytes moved, or the ops of a compute */
  readonly detail: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** the commands carried out so far, in order (the last `logLimit` of them) */
  readonly commands: Effect.Effect<ReadonlyArray<Recorded>>
  readonly clear: Effect.Effect<void>
  /** the devices of the current build */
  readonly devices: Effect.Effect<ReadonlyArray<Device.Device>>
  /** loses every device of the current build now */
  readonly loseDevices: (reason: string) => Effect.Effect<void>
  /** allocations and submits counted so far (over all builds) */
  readonly counters: Effect.Effect<{ readonly allocations: number; readonly submits: number }>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class TestGpu extends Context.Tag("@effect-gpu/testing/TestGpu")<TestGpu, Service>() {}

interface Shared {
  allocations: number
  submits: number
  /** a ring of the last `limit` commands: `log[(start + i) % limit]` is the i-th kept */
  readonly log: Array<Recorded>
  start: number
  readonly limit: number
}

const record = (shared: Shared, entry: Recorded) => {
  if (shared.log.length < shared.limit) shared.log.push(entry)
  else {
    shared.log[shared.start] = entry
    shared.start = (shared.start + 1) % shared.limit
  }
}

const recorded = (shared: Shared): Array<Recorded> => [
  ...shared.log.slice(shared.start),
  ...shared.log.slice(0, shared.start)
]

const makeDevice = (
  name: string,
  options: Options,
  shared: Shared,
  state: { lost: string | undefined }
): Device.Device => {
  const cpu = Cpu.interpreter(name)
  const ledger = Ledger.make(options.memory ?? 1024 ** 3, name)
  const faults = options.faults ?? {}
  const lost = () => new DeviceLost({ device: name, reason: state.lost ?? "lost" })
  const detail = (command: Command): string => {
    switch (command._tag) {
      case "Compute":
        return command.plan.graph.nodes.filter((n) => !Op.isView(n.op)).map((n) => Op.name(n.op)).join(",")
      case "SetTensor":
        return `${command.data.byteLength} bytes`
      case "GetTensor":
      case "CopyTensor":
      case "Memset":
        return `${command.size} bytes`
      case "RecordEvent":
      case "WaitEvent":
        return `event ${command.eventId}`
      case "Synchronize":
        return ""
    }
  }
  const interpreter: Interpreter = {
    device: name,
    fence: Effect.suspend(() => (state.lost !== undefined ? Effect.fail(lost()) : Effect.void)),
    observe: (command) => {
      record(shared, { device: name, command: command._tag, detail: detail(command) })
    },
    execute: (command) =>
      Effect.gen(function*() {
        if (state.lost !== undefined) return yield* lost()
        switch (command._tag) {
          case "Compute": {
            const ops = command.plan.graph.nodes.filter((n) => !Op.isView(n.op)).map((n) => Op.name(n.op))
            shared.submits++
            if (faults.deviceLostAtSubmit !== undefined && shared.submits === faults.deviceLostAtSubmit) {
              state.lost = `simulated loss at submit ${shared.submits}`
              return yield* lost()
            }
            if (faults.kernelErrorOn !== undefined && ops.includes(faults.kernelErrorOn)) {
              return yield* new KernelError({
                op: faults.kernelErrorOn,
                device: name,
                detail: "simulated kernel error"
              })
            }
            if (options.latency !== undefined) yield* Effect.sleep(options.latency)
            return yield* cpu.execute(command)
          }
          default:
            return yield* cpu.execute(command)
        }
      })
  }
  const bufferType = BufferType.make({
    name: `${name}_Private`,
    device: name,
    kind: "private",
    alignment: 256,
    maxSize: options.maxBufferSize ?? 2 ** 31,
    isHost: false,
    ...(options.sharedQueue === true ? { queue: "Test" } : {}),
    ledger,
    create: (size) =>
      Effect.suspend((): Effect.Effect<Buffer.Primitives, AllocationError | DeviceLost> => {
        shared.allocations++
        if (state.lost !== undefined) return Effect.fail(lost())
        if (faults.allocationFailsAt !== undefined && shared.allocations === faults.allocationFailsAt) {
          return Effect.fail(
            new AllocationError({
              bufferType: `${name}_Private`,
              requested: size,
              available: ledger.free(),
              reason: `simulated out of memory at allocation ${shared.allocations}`
            })
          )
        }
        const host = new Uint8Array(Math.ceil(size / 4) * 4).subarray(0, size)
        return Effect.succeed({
          host,
          native: host,
          memset: (o: number, n: number, v: number) => Effect.sync(() => void host.fill(v, o, o + n)),
          write: (o: number, d: Uint8Array) => Effect.sync(() => host.set(d, o)),
          read: (o: number, n: number) => Effect.sync(() => host.slice(o, o + n))
        })
      }),
    destroy: () => Effect.void
  })
  return Device.make({
    name,
    description: "a mock GPU computing with the CPU reference kernels",
    type: "GPU",
    ledger,
    bufferType,
    bufferFromHost: (bytes, o) =>
      Effect.flatMap(bufferType.allocate(bytes.byteLength, o), (b) => Effect.as(b.set(0, bytes), b)),
    interpreter,
    supportsOp: (t) => !(options.unsupported ?? []).includes(Op.name(t.op)) && Cpu.supportsOp(t),
    offloadMinBatch: 32,
    leafBuffer: false
  })
}

/**
 * A registry with the mock devices (and the CPU), plus the TestGpu service to inspect and steer them.
 *
 * @example
 * ```ts
 * import { Registry } from "@effect-gpu/core"
 * import { TestGpu } from "@effect-gpu/testing"
 * import { Effect } from "effect"
 *
 * // Test0, a mock GPU that computes like the CPU; steer it (faults, latency, memory) through the TestGpu service
 * const program = Effect.map(Registry.bestDevice, (d) => d.name)
 *
 * Effect.runPromise(program.pipe(Effect.provide(TestGpu.layer()))).then(console.log) // "Test0"
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<Registry.Registry | TestGpu> => {
  // lives in the layer value: counts carry over when a program rebuilds the layer
  const shared: Shared = {
    allocations: 0,
    submits: 0,
    log: [],
    start: 0,
    limit: Math.max(1, options.logLimit ?? 10_000)
  }
  const build = Layer.scopedContext(Effect.gen(function*() {
    const registry = yield* Registry.Registry
    const state = { lost: undefined as string | undefined }
    const n = options.devices ?? 1
    const devices = Array.from({ length: n }, (_, i) => makeDevice(`Test${i}`, options, shared, state))
    for (const d of devices) {
      yield* Effect.addFinalizer(() => Device.markReleased(d))
      yield* registry.register(d)
    }
    return Context.make(TestGpu, {
      commands: Effect.sync(() => recorded(shared)),
      clear: Effect.sync(() => {
        shared.log.length = 0
        shared.start = 0
      }),
      devices: Effect.succeed(devices),
      loseDevices: (reason) =>
        Effect.sync(() => {
          state.lost = reason
        }),
      counters: Effect.sync(() => ({ allocations: shared.allocations, submits: shared.submits }))
    })
  }))
  return Layer.merge(build, Cpu.register()).pipe(Layer.provideMerge(Registry.layer))
}
