import type { Command } from "@effect-gpu/core"
import { Backend, Cpu, Device, GpuError, Graph, Ledger, Ops, Registry, Tensor } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

const cpu = Effect.provide(Cpu.layer())

describe("typed errors", () => {
  it.effect("ShapeError names the op and the shapes when the op is built", () =>
    Effect.gen(function*() {
      const a = yield* Tensor.make("a", "f32", [3, 2])
      const b = yield* Tensor.make("b", "f32", [2, 2])
      const e = yield* Effect.flip(Ops.add(a, b))
      assert.instanceOf(e, GpuError.ShapeError)
      assert.strictEqual(e.op, "add")
      assert.deepStrictEqual(e.shapes, [[3, 2, 1, 1], [2, 2, 1, 1]])
      assert.match(e.message, /add\(f32\[3, 2, 1, 1\], f32\[2, 2, 1, 1\]\)/)
      const m = yield* Effect.flip(Ops.mulMat(a, b))
      assert.strictEqual(m.op, "mul_mat")
      const r = yield* Effect.flip(Ops.reshape(a, [4]))
      assert.strictEqual(r.op, "reshape")
      const v = yield* Effect.flip(Ops.view(a, [4, 2], [16], 0))
      assert.match(v.reason, /exceeds/)
      const bad = yield* Effect.flip(Tensor.make("x", "f32", [2, -1]))
      assert.strictEqual(bad._tag, "ShapeError")
      // errors flow through nested builders
      const nested = yield* Effect.flip(Ops.softMax(Ops.add(a, b)))
      assert.strictEqual(nested.op, "add")
    }))

  it.scoped("UnsupportedOp when a device cannot run a node", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const q = yield* g.input("q", "q8_0", [32, 2])
      yield* g.output(Ops.cpy(Ops.cpy(q, "f32"), "f16"))
      // a device whose kernels stop at dequantizing: the f16 copy after it is not theirs
      const cpu = yield* Registry.bestDevice
      const device = Device.make({
        name: "Narrow",
        description: "the CPU's kernels, all but f16 copies",
        type: "CPU",
        ledger: cpu.ledger,
        bufferType: cpu.bufferType,
        bufferFromHost: cpu.bufferFromHost,
        interpreter: Cpu.interpreter("Narrow"),
        supportsOp: (t) => t.dtype !== "f16" && Cpu.supportsOp(t),
        leafBuffer: false
      })
      const backend = yield* device.makeBackend()
      const e = yield* Effect.flip(backend.allocate(g))
      assert.instanceOf(e, GpuError.UnsupportedOp)
      assert.strictEqual(e.op, "cpy")
      assert.strictEqual(e.device, "Narrow")
    }).pipe(cpu))

  it.scoped("AllocationError over the maximum size or the device memory", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const tooBig = yield* Effect.flip(device.bufferType.allocate(device.bufferType.maxSize + 1))
      assert.instanceOf(tooBig, GpuError.AllocationError)
      assert.strictEqual(tooBig.requested, device.bufferType.maxSize + 1)
      yield* device.bufferType.allocate(600)
      const full = yield* Effect.flip(device.bufferType.allocate(600))
      assert.instanceOf(full, GpuError.AllocationError)
      assert.strictEqual(full.available, 400)
      assert.match(full.message, /free memory/)
    }).pipe(Effect.provide(Cpu.layer({ memory: 1000 }))))

  it.scoped("OutOfBounds for bad buffer and tensor ranges", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const buf = yield* device.bufferType.allocate(64)
      const e1 = yield* Effect.flip(buf.set(60, new Uint8Array(8)))
      assert.instanceOf(e1, GpuError.OutOfBounds)
      assert.deepStrictEqual([e1.offset, e1.size, e1.limit], [60, 8, 64])
      assert.strictEqual((yield* Effect.flip(buf.get(-1, 4)))._tag, "OutOfBounds")
      assert.strictEqual((yield* Effect.flip(buf.memset(0, 65, 0)))._tag, "OutOfBounds")
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [4])
      yield* g.output(Ops.relu(x))
      const backend = yield* device.makeBackend()
      const plan = yield* backend.allocate(g)
      const e2 = yield* Effect.flip(backend.setAsync(plan.location(x)!, new Uint8Array(8), 12))
      assert.instanceOf(e2, GpuError.OutOfBounds)
      assert.strictEqual(e2.target, "x")
      const e3 = yield* Effect.flip(plan.set(x, [1, 2, 3]))
      assert.strictEqual(e3._tag, "ShapeError")
    }).pipe(cpu))

  it.effect("NoAdapter when the registry has no device", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(Registry.bestDevice)
      assert.instanceOf(e, GpuError.NoAdapter)
      const n = yield* Effect.flip(Registry.deviceByName("WebGPU0"))
      assert.match(n.message, /no device named WebGPU0/)
    }).pipe(Effect.provide(Registry.layer)))

  it.scoped("KernelError fails the compute; DeviceLost is sticky for every later command", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const base = Cpu.interpreter("faulty")
      let computes = 0
      const interpreter: Command.Interpreter = {
        ...base,
        execute: (c) => {
          if (c._tag !== "Compute") return base.execute(c)
          computes++
          return computes === 1
            ? Effect.fail(new GpuError.KernelError({ op: "relu", device: "faulty", detail: "bad kernel" }))
            : Effect.fail(new GpuError.DeviceLost({ device: "faulty", reason: "test" }))
        }
      }
      const backend = yield* Backend.make({ name: "faulty", device, interpreter, ledger: Ledger.make(1 << 20) })
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [4])
      yield* g.output(Ops.relu(x))
      const plan = yield* backend.allocate(g)
      const k = yield* Effect.flip(backend.compute(plan))
      assert.instanceOf(k, GpuError.KernelError)
      // the backend still works after a kernel error
      yield* plan.set(x, [1, -1, 2, -2])
      assert.deepStrictEqual(Array.from(yield* plan.get(x)), [1, -1, 2, -2])
      const lost = yield* Effect.flip(backend.compute(plan))
      assert.instanceOf(lost, GpuError.DeviceLost)
      const after = yield* Effect.flip(plan.get(x))
      assert.strictEqual(after._tag, "DeviceLost")
      assert.strictEqual((yield* Effect.flip(backend.synchronize))._tag, "DeviceLost")
    }).pipe(cpu))

  it.effect("errors are recognised by isGpuError and encode through the schema union", () =>
    Effect.sync(() => {
      const e = new GpuError.OutOfBounds({ target: "t", offset: 1, size: 2, limit: 2 })
      assert.isTrue(GpuError.isGpuError(e))
      assert.isFalse(GpuError.isGpuError(new Error("x")))
      assert.match(e.message, /\[1, 3\) are outside \[0, 2\)/)
    }))
})
