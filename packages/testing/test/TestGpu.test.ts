import type { Command, Tensor } from "@effect-gpu/core"
import { Backend, Cpu, GpuError, Graph, Ops, Registry } from "@effect-gpu/core"
import { Conformance, LeakCheck, TestGpu } from "@effect-gpu/testing"
import { ConformanceSuite } from "@effect-gpu/testing/vitest"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Scope, TestClock } from "effect"

/** x -> softmax(x * 2) on the first mock device */
const smallGraph = Effect.gen(function*() {
  const g = Graph.make()
  const x = yield* g.input("x", "f32", [4])
  const y = yield* g.output(Ops.softMax(Ops.scale(x, 2)))
  return { g, x, y }
})

const computeOnce = Effect.gen(function*() {
  const device = yield* Registry.deviceByName("Test0")
  const backend = yield* device.makeBackend()
  const { g, x, y } = yield* smallGraph
  const plan = yield* backend.allocate(g)
  yield* plan.set(x, [1, 2, 3, 4])
  yield* backend.compute(plan)
  return { backend, plan, y }
})

describe("TestGpu", () => {
  it.scoped("computes like the CPU and records the command stream", () =>
    Effect.gen(function*() {
      const gpu = yield* TestGpu.TestGpu
      const { backend, plan, y } = yield* computeOnce
      const out = Array.from(yield* plan.get(y))
      assert.closeTo(out.reduce((a, b) => a + b, 0), 1, 1e-6)
      const log = (yield* gpu.commands).map((c) => `${c.command}:${c.detail}`)
      assert.deepStrictEqual(log, ["SetTensor:16 bytes", "Compute:scale,soft_max", "GetTensor:16 bytes"])
      // events, waits, copies and synchronizations are recorded too
      const d = yield* Registry.deviceByName("Test0")
      const other = yield* d.makeBackend()
      const ev = yield* d.makeEvent
      yield* gpu.clear
      yield* backend.recordEvent(ev)
      yield* other.waitEvent(ev)
      yield* other.copyAsync(plan.location(y)!, plan.location(y)!)
      yield* other.synchronize
      assert.deepStrictEqual((yield* gpu.commands).map((c) => c.command), [
        "RecordEvent",
        "WaitEvent",
        "CopyTensor",
        "Synchronize"
      ])
      assert.strictEqual((yield* Registry.bestDevice).name, "Test0")
    }).pipe(Effect.provide(TestGpu.layer())))

  it.scoped("simulates virtual devices and a memory limit", () =>
    Effect.gen(function*() {
      const names = (yield* Registry.devices).map((d) => d.name).sort()
      assert.deepStrictEqual(names, ["CPU", "Test0", "Test1", "Test2"])
      const d = yield* Registry.deviceByName("Test2")
      yield* d.bufferType.allocate(3000)
      const e = yield* Effect.flip(d.bufferType.allocate(2000))
      assert.instanceOf(e, GpuError.AllocationError)
      assert.strictEqual(e.available, 1096)
    }).pipe(Effect.provide(TestGpu.layer({ devices: 3, memory: 4096 }))))

  it.scoped("adds latency to every compute, on the Clock", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(computeOnce)
      yield* TestClock.adjust("50 millis")
      assert.isTrue((yield* Fiber.poll(fiber))._tag === "None")
      yield* TestClock.adjust("60 millis")
      const { plan, y } = yield* Fiber.join(fiber)
      assert.strictEqual((yield* plan.get(y)).length, 4)
    }).pipe(Effect.provide(TestGpu.layer({ latency: "100 millis" }))))

  it.scoped("fails the Nth allocation with AllocationError", () =>
    Effect.gen(function*() {
      const d = yield* Registry.deviceByName("Test0")
      yield* d.bufferType.allocate(16)
      yield* d.bufferType.allocate(16)
      const e = yield* Effect.flip(d.bufferType.allocate(16))
      assert.instanceOf(e, GpuError.AllocationError)
      assert.match(e.reason, /allocation 3/)
      yield* d.bufferType.allocate(16)
      assert.deepStrictEqual((yield* (yield* TestGpu.TestGpu).counters).allocations, 4)
      // nothing leaked by the failed one
      assert.strictEqual(d.ledger.snapshot().buffers, 3)
    }).pipe(Effect.provide(TestGpu.layer({ faults: { allocationFailsAt: 3 } }))))

  it.scoped("loses the device at the Nth submit: that and every later command fail with DeviceLost", () =>
    Effect.gen(function*() {
      const { backend, plan, y } = yield* computeOnce
      const e = yield* Effect.flip(backend.compute(plan))
      assert.instanceOf(e, GpuError.DeviceLost)
      assert.match(e.reason, /submit 2/)
      assert.strictEqual((yield* Effect.flip(plan.get(y)))._tag, "DeviceLost")
      const fresh = yield* (yield* Registry.deviceByName("Test0")).makeBackend()
      assert.strictEqual((yield* Effect.flip(fresh.synchronize))._tag, "DeviceLost")
    }).pipe(Effect.provide(TestGpu.layer({ faults: { deviceLostAtSubmit: 2 } }))))

  it.scoped("fails computes containing a named op with KernelError; others run", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(computeOnce)
      assert.instanceOf(e, GpuError.KernelError)
      assert.strictEqual(e.op, "soft_max")
      const d = yield* Registry.deviceByName("Test0")
      const backend = yield* d.makeBackend()
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [2])
      const y = yield* g.output(Ops.neg(x))
      const plan = yield* backend.allocate(g)
      yield* plan.set(x, [1, -2])
      yield* backend.compute(plan)
      assert.deepStrictEqual(Array.from(yield* plan.get(y)), [-1, 2])
    }).pipe(Effect.provide(TestGpu.layer({ faults: { kernelErrorOn: "soft_max" } }))))

  it.scoped("loseDevices loses every device of the build on demand", () =>
    Effect.gen(function*() {
      const gpu = yield* TestGpu.TestGpu
      yield* gpu.loseDevices("unplugged")
      const e = yield* Effect.flip(computeOnce)
      assert.strictEqual(e._tag, "DeviceLost")
    }).pipe(Effect.provide(TestGpu.layer())))
})

describe("LeakCheck", () => {
  it.scoped("keeps the last logLimit commands: the log does not grow without bound", () =>
    Effect.gen(function*() {
      const gpu = yield* TestGpu.TestGpu
      const { backend, plan, y } = yield* computeOnce
      for (let i = 0; i < 30; i++) yield* backend.compute(plan)
      yield* plan.get(y)
      const log = yield* gpu.commands
      assert.strictEqual(log.length, 8)
      assert.deepStrictEqual(log.map((c) => c.command), [...new Array(7).fill("Compute"), "GetTensor"])
    }).pipe(Effect.provide(TestGpu.layer({ logLimit: 8 }))))

  it.scoped("maxBufferSize: a tensor over a GPU's binding limit fails allocation as on WebGPU", () =>
    Effect.gen(function*() {
      const device = yield* Registry.deviceByName("Test0")
      const backend = yield* device.makeBackend()
      const g = Graph.make()
      // 256 MiB of weights against lavapipe's 128 MiB binding limit
      const w = yield* g.param("w", "f32", [64 * 1024 * 1024])
      yield* g.output(Ops.scale(w, 2))
      const e = yield* Effect.flip(backend.allocate(g))
      assert.instanceOf(e, GpuError.AllocationError)
      assert.strictEqual(e.requested, 256 * 1024 * 1024)
      assert.strictEqual(e.available, 128 * 1024 * 1024)
    }).pipe(Effect.provide(TestGpu.layer({ maxBufferSize: 128 * 1024 * 1024 }))))

  it.scoped("passes when everything is released and catches a deliberate leak", () =>
    Effect.gen(function*() {
      const d = yield* Registry.deviceByName("Test0")
      yield* LeakCheck.check(Effect.flatMap(d.bufferType.allocate(64), () => d.makeBackend()))
      const escape = yield* Scope.make()
      const leak = yield* Effect.flip(LeakCheck.check(Scope.extend(d.bufferType.allocate(64), escape)))
      assert.instanceOf(leak, LeakCheck.Leak)
      assert.match(leak.message, /Test0: buffers 0 -> 1, bytes 0 -> 64/)
      yield* Scope.close(escape, Effect.void as never)
      assert.strictEqual(d.ledger.snapshot().buffers, 0)
    }).pipe(Effect.provide(TestGpu.layer())))
})

/** the CPU kernels, then `corrupt` applied to the memory of every node it selects */
const corrupting = (
  name: string,
  select: (n: Tensor.Tensor) => boolean,
  corrupt: (host: Uint8Array, offset: number, n: Tensor.Tensor) => void
): Command.Interpreter => {
  const base = Cpu.interpreter(name)
  return {
    ...base,
    execute: (c) =>
      Effect.tap(base.execute(c), () =>
        Effect.sync(() => {
          if (c._tag !== "Compute") return
          for (const n of c.plan.graph.nodes.filter(select)) {
            const loc = c.plan.location(n)!
            corrupt(loc.buffer.host!, loc.offset, n)
          }
        }))
  }
}

const elements = (n: Tensor.Tensor) => n.ne[0] * n.ne[1] * n.ne[2] * n.ne[3]

/** add writes every element one place early (an off-by-one) */
const offByOne = () =>
  corrupting("OffByOne", (n) => n.op._tag === "Add", (host, offset, n) => {
    const es = n.dtype === "f16" ? 2 : 4
    host.copyWithin(offset, offset + es, offset + es * elements(n))
  })

/** neg writes one element past its result */
const overrun = () =>
  corrupting(
    "Overrun",
    (n) => n.op._tag === "Unary" && n.op.kind === "neg",
    (host, offset, n) => host.fill(0, offset + 4 * elements(n), offset + 4 * elements(n) + 4)
  )

describe("the conformance suite catches wrong kernels", () => {
  const wrong = (interpreter: Command.Interpreter, filter: RegExp) =>
    Effect.gen(function*() {
      const device = Cpu.make({ name: "Wrong" })
      const tested = yield* Backend.make({ name: "wrong", device, interpreter, ledger: device.ledger })
      const reference = yield* Conformance.referenceBackend
      const cases = Conformance.cases({ f16: true }).filter((c) => filter.test(c.name))
      assert.isAbove(cases.length, 2)
      return yield* Effect.forEach(cases, (c) => Conformance.run(c, tested, reference))
    })

  it.scoped("an off-by-one add fails every add case", () =>
    Effect.gen(function*() {
      const outcomes = yield* wrong(offByOne(), /^add_(?!id)/)
      for (const o of outcomes) assert.isFalse(o.passed, o.name)
      const good = yield* wrong(Cpu.interpreter("Good"), /^add_(?!id)/)
      for (const o of good) assert.isTrue(o.passed, o.name)
    }))

  it.scoped("a kernel writing past its result is caught by the sentinels", () =>
    Effect.gen(function*() {
      const outcomes = yield* wrong(overrun(), /^neg_f32/)
      for (const o of outcomes) {
        assert.isFalse(o.passed, o.name)
        assert.match(o.detail, /out-of-bounds write/)
      }
    }))
})

// the mock passes the whole suite, lifecycle included: any backend can be checked this way
ConformanceSuite.conformance(TestGpu.layer(), { device: "Test0", f16: true })
