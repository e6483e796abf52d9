/**
 * The CPU backend: every op in plain TypeScript over host memory. It is the reference other backends are
 * checked against, and the device programs get when no other exists. A compute runs in the caller's
 * fiber and yields to the event loop every few milliseconds, so timers run and an interruption stops it
 * between nodes.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as BufferType from "./BufferType.js"
import type { Interpreter } from "./Command.js"
import * as Device from "./Device.js"
import * as DType from "./DType.js"
import { AllocationError } from "./GpuError.js"
import { Acc, memoryOf } from "./internal/cpu/acc.js"
import { run } from "./internal/cpu/run.js"
import * as Ledger from "./Ledger.js"
import * as Op from "./Op.js"
import * as Registry from "./Registry.js"
import type { Tensor } from "./Tensor.js"
import type * as Trace from "./Trace.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** the device's name (default "CPU") */
  readonly name?: string
  /** bytes the device may hold (default 16 GiB); allocations beyond fail with AllocationError */
  readonly memory?: number
}

const hostPrimitives = (host: Uint8Array) => ({
  host,
  native: host,
  memset: (offset: number, size: number, value: number) =>
    Effect.sync(() => {
      host.fill(value, offset, offset + size)
    }),
  write: (offset: number, data: Uint8Array) =>
    Effect.sync(() => {
      host.set(data, offset)
    }),
  read: (offset: number, size: number) => Effect.sync(() => host.slice(offset, offset + size)),
  copyFrom: (src: { readonly host: Uint8Array | undefined }, srcOffset: number, dstOffset: number, size: number) =>
    Effect.sync(() => {
      if (src.host === undefined) return false
      host.set(src.host.subarray(srcOffset, srcOffset + size), dstOffset)
      return true
    })
})

/**
 * A macrotask turn: unlike `Effect.yieldNow`, which stays on the microtask queue, this lets timers
 * and I/O callbacks run while a long compute is in progress.
 */
const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const schedule = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate
  if (schedule !== undefined) schedule(() => resume(Effect.void))
  else setTimeout(() => resume(Effect.void), 0)
})

/**
 * The CPU's interpreter: runs each command at once, each compute node by node.
 *
 * @since 0.1.0
 * @category constructors
 */
export const interpreter = (deviceName: string): Interpreter => ({
  device: deviceName,
  fence: Effect.void,
  execute: (command) => {
    switch (command._tag) {
      case "SetTensor":
        return Effect.sync(() => {
          command.buffer.host!.set(command.data, command.offset)
        })
      case "GetTensor":
        return Effect.sync(() => command.buffer.host!.slice(command.offset, command.offset + command.size))
      case "Memset":
        return Effect.sync(() => {
          command.buffer.host!.fill(command.value, command.offset, command.offset + command.size)
        })
      case "CopyTensor":
        // from another device's memory (a scheduler's copy between splits): that buffer's own copy
        if (command.src.host === undefined || command.dst.host === undefined) {
          return command.dst.copyFrom(command.src, command.srcOffset, command.dstOffset, command.size)
        }
        return Effect.sync(() => {
          const src = command.src.host!.subarray(command.srcOffset, command.srcOffset + command.size)
          command.dst.host!.set(src, command.dstOffset)
        })
      case "Compute":
        return Effect.gen(function*() {
          const { abort, plan } = command
          const accs = new Map<number, Acc>()
          const acc = (t: Tensor): Acc => {
            let a = accs.get(t.id)
            if (a === undefined) {
              const loc = plan.location(t)
              const host = loc?.buffer.host
              if (loc === undefined || host === undefined) {
                throw new Error(`cpu: tensor ${t.name || `#${t.id}`} has no host memory in this plan`)
              }
              a = new Acc(t, memoryOf(host), host.byteOffset + loc.offset)
              accs.set(t.id, a)
            }
            return a
          }
          const entries: Array<Trace.Entry> = []
          let lastYield = performance.now()
          const nodes = plan.graph.nodes
          for (let i = 0; i < nodes.length; i++) {
            const node = nodes[i]
            if (Op.isView(node.op)) continue
            const t0 = performance.now()
            run(node, acc)
            const t1 = performance.now()
            if (command.capture) {
              entries.push({
                index: i,
                op: Op.name(node.op),
                name: node.name,
                dtype: node.dtype,
                ne: [...node.ne],
                kernel: `cpu:${Op.name(node.op)}`,
                hostTimeMs: t1 - t0
              })
            }
            // let timers and other fibers run (an interruption sets the abort flag) every few milliseconds
            if (t1 - lastYield > 8) {
              yield* yieldToEventLoop
              lastYield = performance.now()
            }
            if (abort.aborted) break
          }
          return command.capture ? { device: deviceName, backend: deviceName, entries } : undefined
        })
    }
  }
})

/**
 * Every op with f32, f16 and i32 tensors, and quantized ones where the op takes them (weights of
 * products, tables of get_rows, copies that quantize or dequantize).
 *
 * @since 0.1.0
 * @category predicates
 */
export const supportsOp = (t: Tensor): boolean =>
  (DType.isComputable(t.dtype) || Op.writesQuantized(t.op)) &&
  t.src.every((s, i) => DType.isComputable(s.dtype) || Op.readsQuantized(t.op, i))

/**
 * Builds a CPU device.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options?: Options): Device.Device => {
  const name = options?.name ?? "CPU"
  const ledger = Ledger.make(options?.memory ?? 16 * 1024 ** 3, "CPU")
  // host memory, of a fresh array or of the caller's bytes (mapped: no copy)
  const hostType = (kind: "host" | "mapped", create: (size: number) => Uint8Array) =>
    BufferType.make({
      name: kind === "host" ? name : `${name}_Mapped`,
      device: name,
      kind,
      alignment: 32,
      maxSize: 2 ** 31,
      isHost: true,
      ledger,
      create: (size) => Effect.sync(() => hostPrimitives(create(size))),
      destroy: () => Effect.void
    })
  const mappedType = hostType("mapped", (size) => new Uint8Array(size))
  return Device.make({
    name,
    description: "the reference backend: pure TypeScript on the host",
    type: "CPU",
    ledger,
    bufferType: hostType("host", (size) => new Uint8Array(Math.ceil(size / 4) * 4).subarray(0, size)),
    otherBufferTypes: [mappedType],
    bufferFromHost: (bytes, bufferOptions) =>
      bytes.byteOffset % 4 !== 0
        ? Effect.fail(
          new AllocationError({
            bufferType: mappedType.name,
            requested: bytes.byteLength,
            available: ledger.free(),
            reason: "host bytes must start at a 4-byte boundary"
          })
        )
        : hostType("mapped", () => bytes).allocate(bytes.byteLength, bufferOptions),
    interpreter: interpreter(name),
    supportsOp,
    // the CPU keeps leafs in the compute buffer: no binding is faster for being read-only here
    leafBuffer: false
  })
}

/**
 * Registers a CPU device into the registry for the layer's life.
 *
 * @since 0.1.0
 * @category layers
 */
export const register = (options?: Options): Layer.Layer<never, never, Registry.Registry> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const registry = yield* Registry.Registry
    const device = make(options)
    // closing the layer closes the device: later uses fail with Released
    yield* Effect.addFinalizer(() => Device.markReleased(device))
    yield* registry.register(device)
  }))

/**
 * A registry holding the CPU device.
 *
 * @example
 * ```ts
 * import { Cpu, Registry } from "@effect-gpu/core"
 * import { Effect } from "effect"
 *
 * Effect.runPromise(Registry.devices.pipe(Effect.provide(Cpu.layer()))).then((ds) => console.log(ds.length)) // 1
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<Registry.Registry> =>
  register(options).pipe(Layer.provideMerge(Registry.layer))
