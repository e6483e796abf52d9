/**
 * WebGPU devices: logical devices over one adapter, copies and events between them, configuration, a
 * missing adapter, a lost device, and the memory limit.
 */
import { Cpu, GpuError, Ledger, Registry } from "@effect-gpu/core"
import type { Device } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Gpu from "../src/internal/gpu.js"
import { adapterAvailable, mlp, nmse, realSleep, runOn } from "./utils.js"

const root = path.resolve(__dirname, "../../..")

const gpu2 = WebGpu.layer({ devices: 2 })

/**
 * device 0's result copied into device 1's input after an event recorded behind device 0's compute:
 * equal to what device 0 computed
 */
const copyAfterEvent = (d0: Device.Device, d1: Device.Device, seed: number) =>
  Effect.gen(function*() {
    const [b0, b1] = [yield* d0.makeBackend(), yield* d1.makeBackend()]
    const { g, x, y } = yield* mlp(32, 6)
    const [p0, p1] = [yield* b0.allocate(g), yield* b1.allocate(g)]
    yield* p0.set(x, Generators.values(seed, 1024))
    const ev = yield* d0.makeEvent
    yield* b0.computeAsync(p0)
    yield* b0.recordEvent(ev)
    yield* b1.waitEvent(ev)
    yield* b1.copyAsync(p0.location(y)!, p1.location(x)!)
    assert.deepStrictEqual(Array.from(yield* p1.get(x)), Array.from(yield* p0.get(y)))
    yield* ev.synchronize
  })

describe.skipIf(!adapterAvailable)("WebGPU devices", () => {
  it.layer(gpu2, { timeout: "120 seconds" })("two virtual devices", (it) => {
    it.scoped("registers WebGPU0 and WebGPU1 next to the CPU, each described", () =>
      Effect.gen(function*() {
        const names = (yield* Registry.devices).map((d) => d.name)
        assert.deepStrictEqual(names.sort(), ["CPU", "WebGPU0", "WebGPU1"])
        const best = yield* Registry.bestDevice
        assert.strictEqual(best.type, "GPU")
        const props = yield* best.props
        assert.strictEqual(props.type, "GPU")
        assert.isAbove(props.memory.total, 0)
        assert.isTrue(props.caps.async && props.caps.events && props.caps.bufferFromHostPtr)
        // prompts' attention fused only where its one-pass kernel runs: subgroup matrices and f16
        assert.strictEqual(
          props.caps.fusedAttention,
          WebGpuDevice.hasSubgroupMatrices(best) && props.description.includes("shader-f16")
        )
        assert.isTrue(props.description.length > 0)
        const d0 = yield* Registry.deviceByName("WebGPU0")
        const d1 = yield* Registry.deviceByName("WebGPU1")
        assert.notStrictEqual(
          Option.getOrThrow(WebGpuDevice.gpuDevice(d0)),
          Option.getOrThrow(WebGpuDevice.gpuDevice(d1))
        )
      }))

    it.scoped("both devices compute the same graph as the CPU", () =>
      Effect.gen(function*() {
        const cpu = yield* runOn(Cpu.make(), 24, 3, 5)
        for (const name of ["WebGPU0", "WebGPU1"]) {
          const gpu = yield* runOn(yield* Registry.deviceByName(name), 24, 3, 5)
          assert.isBelow(nmse(gpu, cpu), 1e-6, name)
        }
      }))

    it.scoped("copyAsync between the two devices and to the CPU, ordered after the source queue", () =>
      Effect.gen(function*() {
        const d0 = yield* Registry.deviceByName("WebGPU0")
        const d1 = yield* Registry.deviceByName("WebGPU1")
        const b0 = yield* d0.makeBackend()
        const b1 = yield* d1.makeBackend()
        const { g, x, y } = yield* mlp(16, 2)
        const p0 = yield* b0.allocate(g)
        const p1 = yield* b1.allocate(g)
        yield* p0.set(x, Generators.values(3, 256))
        yield* b0.computeAsync(p0)
        // the copy waits for b0's compute, then carries y from device 0 into x of device 1
        yield* b1.copyAsync(p0.location(y)!, p1.location(x)!, b0)
        const moved = Array.from(yield* p1.get(x))
        assert.deepStrictEqual(moved, Array.from(yield* p0.get(y)))
        const cpuBackend = yield* Cpu.make().makeBackend()
        const pc = yield* cpuBackend.allocate(g)
        yield* cpuBackend.copyAsync(p0.location(y)!, pc.location(x)!, b0)
        assert.deepStrictEqual(Array.from(yield* pc.get(x)), moved)
      }))

    it.scoped("an event recorded on one device's backend orders another's", () =>
      Effect.gen(function*() {
        yield* copyAfterEvent(yield* Registry.deviceByName("WebGPU0"), yield* Registry.deviceByName("WebGPU1"), 9)
      }))
  })

  // virtual devices sharing one GPUDevice and its queue: a copy from the other device's backend (its work
  // submitted first), and one ordered by an event, both on the GPU; the native buffers all freed after
  it.scoped("two devices sharing a GPUDevice copy between them on the GPU, in the queue's order", () =>
    Effect.gen(function*() {
      const [d0, d1] = yield* WebGpu.make({ devices: 2, shareDevice: true })
      const gpu = Option.getOrThrow(WebGpuDevice.gpuDevice(d0))
      assert.strictEqual(Option.getOrThrow(WebGpuDevice.gpuDevice(d1)), gpu)
      const { g, x, y } = yield* mlp(32, 6)
      yield* Effect.scoped(Effect.gen(function*() {
        const [b0, b1] = [yield* d0.makeBackend(), yield* d1.makeBackend()]
        const [p0, p1] = [yield* b0.allocate(g), yield* b1.allocate(g)]
        yield* p0.set(x, Generators.values(9, 1024))
        yield* b0.computeAsync(p0)
        yield* b1.copyAsync(p0.location(y)!, p1.location(x)!, b0)
        const want = Array.from(yield* p0.get(y))
        assert.deepStrictEqual(Array.from(yield* p1.get(x)), want)
        yield* copyAfterEvent(d0, d1, 10)
      }))
      assert.strictEqual(WebGpuDevice.liveNativeBuffers(d0) + WebGpuDevice.liveNativeBuffers(d1), 0)
    }))

  it.scoped("a lost device fails every later operation with DeviceLost", () =>
    Effect.gen(function*() {
      // a device of its own, so the shared one stays healthy
      const [d] = yield* WebGpu.make({ devices: 1 })
      const backend = yield* d.makeBackend()
      const { g, x } = yield* mlp(8, 1)
      const plan = yield* backend.allocate(g)
      yield* plan.set(x, Generators.values(1, 64))
      yield* backend.compute(plan)
      Option.getOrThrow(WebGpuDevice.gpuDevice(d)).destroy()
      yield* realSleep(50)
      const e = yield* Effect.flip(backend.compute(plan))
      assert.instanceOf(e, GpuError.DeviceLost)
      assert.strictEqual((yield* Effect.flip(plan.get(x)))._tag, "DeviceLost")
    }))

  it.scoped("the configured memory bounds allocations with AllocationError, and frees return it", () =>
    Effect.gen(function*() {
      const [d] = yield* WebGpu.make({ devices: 1, memory: 4096 })
      assert.strictEqual((yield* d.memory).total, 4096)
      yield* Effect.scoped(d.bufferType.allocate(3000))
      const kept = yield* d.bufferType.allocate(3000)
      const e = yield* Effect.flip(d.bufferType.allocate(2000))
      assert.instanceOf(e, GpuError.AllocationError)
      assert.strictEqual(e.available, 1096)
      assert.strictEqual((yield* d.memory).free, 1096)
      assert.strictEqual(kept.size, 3000)
    }))

  it.effect("EFFECT_GPU_WEBGPU_DEVICES sets the number of logical devices", () =>
    Effect.gen(function*() {
      const names = yield* Effect.scoped(Effect.map(WebGpu.make(), (ds) => ds.map((d) => d.name)))
      assert.deepStrictEqual(names, ["WebGPU0", "WebGPU1", "WebGPU2"])
    }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["EFFECT_GPU_WEBGPU_DEVICES", "3"]])))))

  it.effect("layerOrCpu falls back to the CPU when no adapter matches", () =>
    Effect.gen(function*() {
      const best = yield* Registry.bestDevice
      assert.strictEqual(best.name, "CPU")
      assert.isTrue(Ledger.isEmpty(best.ledger.snapshot()))
    }).pipe(Effect.provide(WebGpu.layerOrCpu({ adapter: "no such adapter" }))))

  it.effect("layer fails with NoAdapter when no adapter matches", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(Layer.build(WebGpu.layer({ adapter: "no such adapter" })).pipe(Effect.scoped))
      assert.strictEqual(e._tag, "NoAdapter")
    }))
})

describe.skipIf(!adapterAvailable)("Dawn's own messages", () => {
  it("go to Effect's logger at debug level, not to stderr", () => {
    // a process of its own: what Dawn prints natively can only be seen from outside
    const script = path.join(root, "packages/webgpu", `.noise-${process.pid}.ts`)
    fs.writeFileSync(
      script,
      `import { WebGpu } from "@effect-gpu/webgpu"
import { Effect, Logger, LogLevel } from "effect"
const main = Effect.scoped(WebGpu.make({ devices: 1 })).pipe(Logger.withMinimumLogLevel(LogLevel.Debug))
Effect.runPromise(main).then(() => process.exit(0))
`
    )
    // the child's stderr is a file, as in a terminal or a redirect (a socket cannot be reopened)
    const errFile = `${script}.err`
    const errFd = fs.openSync(errFile, "w")
    try {
      const run = spawnSync(path.join(root, "node_modules/.bin/tsx"), [script], {
        cwd: path.join(root, "packages/webgpu"),
        encoding: "utf8",
        timeout: 60_000,
        stdio: ["ignore", "pipe", errFd]
      })
      const stderr = fs.readFileSync(errFile, "utf8")
      assert.strictEqual(run.status, 0, stderr)
      assert.strictEqual(stderr, "", "nothing reaches stderr")
      // on lavapipe Dawn lowers two limits and says so; the messages come as debug log lines
      for (const line of run.stdout.split("\n").filter((l) => l.includes("dawn:"))) assert.include(line, "DEBUG")
    } finally {
      fs.closeSync(errFd)
      fs.rmSync(script, { force: true })
      fs.rmSync(errFile, { force: true })
    }
  })

  it.scoped("a validation error nobody caught fails the next operation with KernelError carrying Dawn's message", () =>
    Effect.gen(function*() {
      const [d] = yield* WebGpu.make({ devices: 1 })
      const backend = yield* d.makeBackend()
      const { g, x } = yield* mlp(8, 1)
      const plan = yield* backend.allocate(g)
      yield* plan.set(x, Generators.values(1, 64))
      // an invalid buffer made behind the backend's back
      const gpu = Option.getOrThrow(WebGpuDevice.gpuDevice(d))
      gpu.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.STORAGE })
      yield* realSleep(50)
      const e = yield* Effect.flip(backend.compute(plan))
      assert.instanceOf(e, GpuError.KernelError)
      assert.include(e.message, "MapRead")
      // reported once: the backend works again
      yield* backend.compute(plan)
    }))
})

describe("Dawn instance flags", () => {
  it("enable the default toggles in one entry and disable timestamp quantization", () => {
    assert.deepStrictEqual(WebGpu.dawnFlags(), [
      `enable-dawn-features=${WebGpu.defaultToggles.join(",")}`,
      "disable-dawn-features=timestamp_quantization"
    ])
    assert.deepStrictEqual(WebGpu.dawnFlags(["a", "b"], []), ["enable-dawn-features=a,b"])
    assert.deepStrictEqual(WebGpu.dawnFlags([], ["c"]), ["disable-dawn-features=c"])
  })

  it("turn robustness off by default, on where asked, and add the environment's toggles", () => {
    assert.include(WebGpu.defaultToggles, "disable_robustness")
    assert.deepStrictEqual(Gpu.toggles(WebGpu.defaultToggles, undefined, []), WebGpu.defaultToggles)
    assert.notInclude(Gpu.toggles(WebGpu.defaultToggles, true, []), "disable_robustness")
    assert.deepStrictEqual(Gpu.toggles(["a", "disable_robustness"], true, ["b", ""]), ["a", "b"])
    // robustness: false with toggles of one's own still turns the checks off, once
    assert.deepStrictEqual(Gpu.toggles(["a"], false, []), ["a", "disable_robustness"])
    assert.deepStrictEqual(Gpu.toggles(WebGpu.defaultToggles, false, []), WebGpu.defaultToggles)
  })
})
