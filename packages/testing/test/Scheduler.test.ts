import { Buffer, Cpu, Graph, Ops, Registry, Scheduler } from "@effect-gpu/core"
import { Generators, LeakCheck, TestGpu } from "@effect-gpu/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"

/** y = softmax(w^T x) + bias, viewed through a transpose before the add: three ops and a view */
const build = Effect.gen(function*() {
  const g = Graph.make()
  const w = yield* g.param("w", "f32", [16, 12])
  const x = yield* g.input("x", "f32", [16, 5])
  const bias = yield* g.input("bias", "f32", [12, 5])
  const p = Ops.softMax(Ops.mulMat(w, x))
  const y = yield* g.output(Ops.add(Ops.cont(Ops.transpose(Ops.transpose(p))), bias))
  return { g, w, x, bias, y }
})

const inputs = { w: Generators.values(1, 16 * 12), x: Generators.values(2, 16 * 5), bias: Generators.values(3, 60) }

/**
 * the graph over two mock devices, its first two nodes pinned to the first: computed once with the
 * inputs, the command log cleared before
 */
const overTwo = Effect.gen(function*() {
  const [d0, d1] = yield* Registry.devices
  const { bias, g, w, x, y } = yield* build
  const built = Graph.from(g)
  const first = new Set(built.nodes.slice(0, 2).map((n) => n.id))
  const scheduler = Scheduler.make([yield* d0.makeBackend(), yield* d1.makeBackend()], {
    placement: (n) => (first.has(n.id) ? 0 : 1)
  })
  const plan = yield* scheduler.allocate(built)
  yield* plan.set(w, inputs.w)
  yield* plan.set(x, inputs.x)
  yield* plan.set(bias, inputs.bias)
  const testGpu = yield* TestGpu.TestGpu
  yield* testGpu.clear
  yield* scheduler.compute(plan)
  const commands = (yield* testGpu.commands).filter((c) => c.command !== "Synchronize")
  return { d0, d1, scheduler, plan, x, y, commands }
})

/** the graph on one backend: the reference */
const single = Effect.gen(function*() {
  const { bias, g, w, x, y } = yield* build
  const backend = yield* Cpu.make().makeBackend()
  const plan = yield* backend.allocate(g)
  yield* plan.set(w, inputs.w)
  yield* plan.set(x, inputs.x)
  yield* plan.set(bias, inputs.bias)
  yield* backend.compute(plan)
  return Array.from(yield* plan.get(y))
})

describe("Scheduler", () => {
  it.scoped("an op the GPU lacks runs on the CPU between two GPU splits, with the copies it needs", () =>
    Effect.gen(function*() {
      const want = yield* single
      const [gpu, cpu] = yield* Registry.devices
      assert.strictEqual(gpu.name, "Test0")
      const scheduler = Scheduler.make([yield* gpu.makeBackend(), yield* cpu.makeBackend()])
      const { bias, g, w, x, y } = yield* build
      const plan = yield* scheduler.allocate(g)
      // mul_mat on the GPU, soft_max on the CPU, the rest back on the GPU
      assert.deepStrictEqual(plan.splits.map((s) => s.backend.device.name), ["Test0", "CPU", "Test0"])
      assert.deepStrictEqual(plan.splits.map((s) => s.nodes.map((n) => n.op._tag)), [
        ["MulMat"],
        ["SoftMax"],
        ["Cont", "Add"]
      ])
      // exactly two tensors cross: the product to the CPU, the softmax back
      assert.deepStrictEqual(plan.splits.map((s) => s.copies.map((c) => [c.from, c.bytes])), [
        [],
        [[0, 12 * 5 * 4]],
        [[1, 12 * 5 * 4]]
      ])
      yield* plan.set(w, inputs.w)
      yield* plan.set(x, inputs.x)
      yield* plan.set(bias, inputs.bias)
      const testGpu = yield* TestGpu.TestGpu
      yield* testGpu.clear
      const capture = yield* scheduler.captureNext
      yield* scheduler.compute(plan)
      // the GPU's command stream: its first split; the product read in its turn for the CPU's copy (240
      // bytes: the read orders the copy, no event); a wait for the CPU's event, then the softmax copied back
      // (240 bytes); its second split. Nothing else crosses
      const commands = (yield* testGpu.commands).filter((c) => c.command !== "Synchronize")
      assert.deepStrictEqual(commands.map((c) => `${c.command} ${c.detail.replace(/event \d+/, "event")}`), [
        "Compute mul_mat",
        "GetTensor 240 bytes",
        "WaitEvent event",
        "CopyTensor 240 bytes",
        "Compute cont,add"
      ])
      const trace = yield* capture
      assert.deepStrictEqual(trace.splits.map((s) => [s.device, s.nodes, s.copies]), [
        ["Test0", 1, []],
        ["CPU", 1, [{ from: "Test0", bytes: 240 }]],
        ["Test0", 2, [{ from: "CPU", bytes: 240 }]]
      ])
      assert.isTrue(trace.splits.every((s) => s.copyMs >= 0 && s.computeMs >= 0))
      assert.isAtLeast(trace.totalMs, trace.splits.reduce((t, s) => t + s.copyMs + s.computeMs, 0) - 1e-6)
      const got = Array.from(yield* plan.get(y))
      got.forEach((v, i) => assert.closeTo(v, want[i], 1e-6))
    }).pipe(Effect.provide(TestGpu.layer({ unsupported: ["soft_max"] }))))

  it.scoped("pinned nodes go where they are pinned; two virtual devices each run their half", () =>
    Effect.gen(function*() {
      const want = yield* single
      const { commands, plan, scheduler, x, y } = yield* overTwo
      assert.deepStrictEqual(plan.splits.map((s) => s.backend.device.name), ["Test0", "Test1"])
      Array.from(yield* plan.get(y)).forEach((v, i) => assert.closeTo(v, want[i], 1e-6))
      // the crossing from one GPU to the other: read in Test0's turn, after its split, and written in
      // Test1's; the read orders it, so no event waits on Test0's queue first
      assert.deepStrictEqual(commands.slice(0, 3).map((c) => `${c.device} ${c.command}`), [
        "Test0 Compute",
        "Test0 GetTensor",
        "Test1 CopyTensor"
      ])
      assert.isFalse(commands.some((c) => c.command === "RecordEvent" || c.command === "WaitEvent"))
      // handed over without waiting, then waited for: x = 0 makes each softmax column uniform (1/12)
      yield* plan.set(x, new Float32Array(16 * 5))
      yield* scheduler.computeAsync(plan)
      yield* scheduler.synchronize(plan)
      Array.from(yield* plan.get(y)).forEach((v, i) => assert.closeTo(v, 1 / 12 + inputs.bias[i], 1e-6))
    }).pipe(Effect.provide(TestGpu.layer({ devices: 2 }))))

  it.scoped("two virtual devices on one queue cross without events or the host", () =>
    Effect.gen(function*() {
      const want = yield* single
      const { commands, d0, d1, plan, y } = yield* overTwo
      assert.isTrue(Buffer.sameQueue(d0.bufferType, d1.bufferType))
      Array.from(yield* plan.get(y)).forEach((v, i) => assert.closeTo(v, want[i], 1e-6))
      // the copy is submitted after Test0's split on the one queue: no read back, no event
      assert.deepStrictEqual(commands.slice(0, 3).map((c) => `${c.device} ${c.command}`), [
        "Test0 Compute",
        "Test1 CopyTensor",
        "Test1 Compute"
      ])
      assert.isFalse(commands.some((c) => ["RecordEvent", "WaitEvent", "GetTensor"].includes(c.command)))
    }).pipe(Effect.provide(TestGpu.layer({ devices: 2, sharedQueue: true }))))

  it.effect("a scheduled plan leaves nothing behind once its scope closes", () =>
    LeakCheck.check(Effect.gen(function*() {
      const [gpu, cpu] = yield* Registry.devices
      const scheduler = Scheduler.make([yield* gpu.makeBackend(), yield* cpu.makeBackend()])
      const { g, x } = yield* build
      const plan = yield* scheduler.allocate(g)
      yield* plan.set(x, inputs.x)
      yield* scheduler.compute(plan)
    })).pipe(Effect.provide(TestGpu.layer({ unsupported: ["soft_max"] }))))

  it.effect("an op no backend supports fails allocation with UnsupportedOp naming them", () =>
    Effect.gen(function*() {
      const [gpu] = yield* Registry.devices
      const scheduler = Scheduler.make([yield* gpu.makeBackend()])
      const { g } = yield* build
      const error = yield* Effect.flip(scheduler.allocate(g))
      assert.strictEqual(error._tag, "UnsupportedOp")
    }).pipe(Effect.scoped, Effect.provide(TestGpu.layer({ unsupported: ["soft_max"] }))))

  it.effect("interrupting a compute mid-split stops it, leaks nothing, and the next compute is right", () =>
    LeakCheck.check(Effect.gen(function*() {
      const want = yield* single
      const [gpu, cpu] = yield* Registry.devices
      const scheduler = Scheduler.make([yield* gpu.makeBackend(), yield* cpu.makeBackend()])
      const { bias, g, w, x, y } = yield* build
      const plan = yield* scheduler.allocate(g)
      yield* plan.set(w, inputs.w)
      yield* plan.set(x, inputs.x)
      yield* plan.set(bias, inputs.bias)
      // each GPU compute takes a second of the TestClock: the first split is still running
      const running = yield* Effect.fork(scheduler.compute(plan))
      yield* TestClock.adjust("100 millis")
      yield* Fiber.interrupt(running)
      const again = yield* Effect.fork(scheduler.compute(plan))
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(again)
      Array.from(yield* plan.get(y)).forEach((v, i) => assert.closeTo(v, want[i], 1e-6))
    })).pipe(Effect.provide(TestGpu.layer({ unsupported: ["soft_max"], latency: "1 second" }))))

  it.scoped("the nodes between two products stay with them (ggml's expansion): one split, not one per node", () =>
    Effect.gen(function*() {
      const [gpu, cpu] = yield* Registry.devices
      const backends = [yield* gpu.makeBackend(), yield* cpu.makeBackend()]
      const scheduler = Scheduler.make(backends, { weights: (leaf) => (leaf.name.startsWith("w") ? 1 : undefined) })
      // batch 1 stays with the CPU's weights; a batch of 32 goes to the GPU, and the adds and silu with it
      for (const [columns, device] of [[1, "CPU"], [32, "Test0"]] as const) {
        const g = Graph.make()
        const w1 = yield* g.param("w1", "f32", [24, 40])
        const w2 = yield* g.param("w2", "f32", [40, 24])
        const x = yield* g.input("x", "f32", [24, columns])
        const b = yield* g.input("b", "f32", [40, columns])
        const c = yield* g.input("c", "f32", [24, columns])
        const y = yield* g.output(Ops.add(Ops.mulMat(w2, Ops.silu(Ops.add(Ops.mulMat(w1, x), b))), c))
        const plan = yield* scheduler.allocate(g)
        assert.deepStrictEqual(plan.splits.map((s) => s.backend.device.name), [device], `${columns} columns`)
        assert.deepStrictEqual(plan.splits[0].nodes.map((n) => n.op._tag), ["MulMat", "Add", "Unary", "MulMat", "Add"])
        const values = [[w1, 7, 24 * 40], [w2, 8, 40 * 24], [x, 9, 24 * columns], [b, 10, 40 * columns], [
          c,
          11,
          24 * columns
        ]] as const
        for (const [t, seed, n] of values) yield* plan.set(t, Generators.values(seed, n))
        yield* scheduler.compute(plan)
        const reference = yield* Cpu.make().makeBackend()
        const single = yield* reference.allocate(g)
        for (const [t, seed, n] of values) yield* single.set(t, Generators.values(seed, n))
        yield* reference.compute(single)
        const want = Array.from(yield* single.get(y))
        Array.from(yield* plan.get(y)).forEach((v, i) => assert.closeTo(v, want[i], 1e-5))
      }
    }).pipe(Effect.provide(TestGpu.layer())))

  it.scoped("weights living on the CPU keep batch-1 products there; a batch of 32 is offloaded to the GPU", () =>
    Effect.gen(function*() {
      const [gpu, cpu] = yield* Registry.devices
      const backends = [yield* gpu.makeBackend(), yield* cpu.makeBackend()]
      const scheduler = Scheduler.make(backends, { weights: (leaf) => (leaf.name === "w" ? 1 : undefined) })
      for (const [columns, device] of [[1, "CPU"], [8, "CPU"], [32, "Test0"]] as const) {
        const g = Graph.make()
        const w = yield* g.param("w", "f32", [64, 48])
        const x = yield* g.input("x", "f32", [64, columns])
        const y = yield* g.output(Ops.mulMat(w, x))
        const plan = yield* scheduler.allocate(g)
        assert.deepStrictEqual(plan.splits.map((s) => s.backend.device.name), [device], `${columns} columns`)
        yield* plan.set(w, Generators.values(5, 64 * 48))
        yield* plan.set(x, Generators.values(6, 64 * columns))
        yield* scheduler.compute(plan)
        const got = Array.from(yield* plan.get(y))
        // against the product computed here
        const a = Generators.values(5, 64 * 48)
        const b = Generators.values(6, 64 * columns)
        got.forEach((v, i) => {
          const [m, n] = [i % 48, Math.floor(i / 48)]
          let s = 0
          for (let k = 0; k < 64; k++) s += a[m * 64 + k] * b[n * 64 + k]
          assert.closeTo(v, s, 1e-4)
        })
      }
    }).pipe(Effect.provide(TestGpu.layer())))
})
