import type { Command as CommandNs } from "@effect-gpu/core"
import { Backend, Cpu, GpuError, Graph, Ops, Plan, Registry, Tensor, Trace } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Option, Tracer } from "effect"

const cpu = Effect.provide(Cpu.layer())

/**
 * A device whose writes land `ms` later on its own timeline, like a GPU's queue: the host returns at
 * once, and the fence waits for every write handed over so far.
 */
const slowWrites = (ms: number): CommandNs.Interpreter => {
  const base = Cpu.interpreter("CPU")
  const inFlight: Array<Promise<unknown>> = []
  return {
    ...base,
    fence: Effect.promise(() => Promise.all(inFlight)),
    execute: (c) =>
      c._tag === "SetTensor"
        ? Effect.sync(() => {
          inFlight.push(new Promise((r) => setTimeout(r, ms)).then(() => Effect.runPromise(base.execute(c))))
        })
        : base.execute(c)
  }
}

const twoTensorPlan = (backend: Backend.Backend) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const x = yield* g.input("x", "f32", [4])
    const y = yield* g.output(Ops.scale(x, 2))
    const plan = yield* backend.allocate(g)
    return { plan, x, y }
  })

describe("Backend", () => {
  it.live("an event recorded on one backend orders another backend's later work", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const slow = yield* Backend.make({ name: "slow", device, interpreter: slowWrites(100), ledger: device.ledger })
      const fast = yield* device.makeBackend()
      const { plan, x } = yield* twoTensorPlan(slow)
      const loc = plan.location(x)!
      const event = yield* device.makeEvent
      yield* slow.setAsync(loc, new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer))
      yield* slow.recordEvent(event)
      // without waiting, the fast backend reads before the slow write lands
      const early = yield* Effect.flatten(fast.getAsync(loc))
      assert.deepStrictEqual(Array.from(new Float32Array(early.buffer)), [0, 0, 0, 0])
      yield* fast.waitEvent(event)
      const late = yield* Effect.flatten(fast.getAsync(loc))
      assert.deepStrictEqual(Array.from(new Float32Array(late.buffer)), [1, 2, 3, 4])
      // the host can wait for it too
      yield* slow.setAsync(loc, new Uint8Array(new Float32Array([5, 6, 7, 8]).buffer))
      yield* slow.recordEvent(event)
      yield* event.synchronize
      assert.deepStrictEqual(Array.from(new Float32Array(loc.buffer.host!.slice(loc.offset, loc.offset + 16).buffer)), [
        5,
        6,
        7,
        8
      ])
    }).pipe(Effect.scoped, cpu))

  it.live("a queued read leaves the queue to later commands while its bytes are awaited; they are its turn's", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const base = Cpu.interpreter("CPU")
      // the bytes taken in the read's turn, handed over only once the gate opens (a GPU map in flight)
      const gate = yield* Deferred.make<void>()
      const interpreter: CommandNs.Interpreter = {
        ...base,
        queueRead: (c) => Effect.map(base.execute(c), (bytes) => Effect.as(Deferred.await(gate), bytes as Uint8Array))
      }
      const backend = yield* Backend.make({ name: "queued", device, interpreter, ledger: device.ledger })
      const { plan, x, y } = yield* twoTensorPlan(backend)
      yield* plan.set(x, [1, 2, 3, 4])
      yield* backend.computeAsync(plan)
      const first = yield* backend.getAsync(plan.location(y)!)
      // the next step's inputs and compute go in while the read waits (they would wait for its bytes if the
      // read kept its turn until then)
      yield* plan.set(x, [5, 6, 7, 8])
      yield* backend.computeAsync(plan).pipe(Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => "stuck" }))
      const second = yield* Effect.fork(plan.get(y))
      assert.isTrue(
        Option.isNone(
          yield* Effect.timeoutTo(first, { duration: "20 millis", onSuccess: Option.some, onTimeout: Option.none })
        ),
        "the read waits for its gate"
      )
      yield* Deferred.succeed(gate, undefined)
      assert.deepStrictEqual(Array.from(new Float32Array((yield* first).buffer)), [2, 4, 6, 8])
      assert.deepStrictEqual(Array.from(yield* Fiber.join(second)), [10, 12, 14, 16])
    }).pipe(Effect.scoped, cpu))

  it.effect("a read after work that failed unawaited fails with that failure; the next synchronize is clean", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const base = Cpu.interpreter("CPU")
      const broken: CommandNs.Interpreter = {
        ...base,
        execute: (c) =>
          c._tag === "Compute"
            ? Effect.fail(new GpuError.KernelError({ op: "compute", device: "CPU", detail: "broken" }))
            : base.execute(c)
      }
      const backend = yield* Backend.make({ name: "broken", device, interpreter: broken, ledger: device.ledger })
      const { plan, x, y } = yield* twoTensorPlan(backend)
      yield* plan.set(x, [1, 2, 3, 4])
      yield* backend.computeAsync(plan)
      const failed = yield* Effect.flip(plan.get(y))
      assert.strictEqual(failed._tag, "KernelError")
      yield* backend.synchronize
      // without a failure before it, a read reads
      assert.deepStrictEqual(Array.from(yield* plan.get(x)), [1, 2, 3, 4])
    }).pipe(Effect.scoped, cpu))

  it.live("copyAsync between two backends waits for the source backend's queue", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const slow = yield* Backend.make({ name: "slow", device, interpreter: slowWrites(50), ledger: device.ledger })
      const other = yield* device.makeBackend()
      const a = yield* twoTensorPlan(slow)
      const b = yield* twoTensorPlan(other)
      yield* a.plan.set(a.x, [1, 2, 3, 4])
      yield* other.copyAsync(a.plan.location(a.x)!, b.plan.location(b.x)!, slow)
      yield* other.compute(b.plan)
      assert.deepStrictEqual(Array.from(yield* b.plan.get(b.y)), [2, 4, 6, 8])
      const scalar = { ...b.plan.location(b.x)!, tensor: yield* Ops.sum(b.x) }
      const wrongSize = yield* Effect.flip(other.copyAsync(a.plan.location(a.x)!, scalar))
      assert.strictEqual(wrongSize._tag, "OutOfBounds")
    }).pipe(Effect.scoped, cpu))

  it.scoped("compute and synchronize are traced: one span each, under the caller's, ended with their exit", () =>
    Effect.gen(function*() {
      const spans: Array<Tracer.Span> = []
      const base = yield* Effect.tracer
      const recording = Tracer.make({
        span: (...args) => {
          const span = base.span(...args)
          spans.push(span)
          return span
        },
        context: base.context
      })
      const backend = yield* Cpu.make().makeBackend()
      const { plan, x } = yield* twoTensorPlan(backend)
      yield* plan.set(x, new Float32Array([1, 2, 3, 4]))
      yield* Effect.zipRight(backend.compute(plan), backend.synchronize).pipe(
        Effect.withSpan("caller"),
        Effect.withTracer(recording)
      )
      const byName = (name: string) => spans.filter((s) => s.name === name)
      const [caller] = byName("caller")
      for (const name of ["Backend.compute", "Backend.synchronize"]) {
        const found = byName(name)
        assert.strictEqual(found.length, 1, name)
        const span = found[0]
        assert.strictEqual(span.status._tag, "Ended", name)
        if (span.status._tag === "Ended") assert.isTrue(Exit.isSuccess(span.status.exit), name)
        assert.strictEqual(span.parent._tag === "Some" ? span.parent.value.spanId : undefined, caller.spanId, name)
      }
    }))

  it.scoped("captureNext records the next compute, node by node", () =>
    Effect.gen(function*() {
      const backend = yield* (yield* Registry.bestDevice).makeBackend()
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [8, 2])
      yield* g.output(Ops.softMax(Ops.rmsNorm(Ops.add(x, x), 1e-6)))
      const plan = yield* backend.allocate(g)
      const trace = yield* backend.captureNext
      yield* backend.compute(plan)
      const t = yield* trace
      assert.deepStrictEqual(t.entries.map((e) => e.op), ["add", "rms_norm", "soft_max"])
      assert.isTrue(t.entries.every((e) => e.hostTimeMs >= 0 && e.kernel.startsWith("cpu:")))
    }).pipe(cpu))

  it.scoped("buffers: memset, set, get, copy between buffers, clear", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const a = yield* device.bufferType.allocate(16)
      const b = yield* device.bufferType.allocate(16)
      yield* a.set(0, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]))
      yield* a.memset(8, 8, 9)
      assert.deepStrictEqual(Array.from(yield* a.get(6, 4)), [7, 8, 9, 9])
      yield* b.copyFrom(a, 2, 4, 6)
      assert.deepStrictEqual(Array.from(yield* b.get(0, 12)), [0, 0, 0, 0, 3, 4, 5, 6, 7, 8, 0, 0])
      yield* b.clear(255)
      assert.deepStrictEqual(Array.from(yield* b.get(14, 2)), [255, 255])
      assert.strictEqual(device.ledger.snapshot().buffers, 2)
    }).pipe(cpu))

  it.effect("leafBuffer: inputs and weights in a second buffer of the plan, released with its scope", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const before = device.ledger.snapshot().buffers
      yield* Effect.scoped(Effect.gen(function*() {
        const backend = yield* device.makeBackend()
        const g = Graph.make()
        const w = yield* g.param("w", "f32", [3, 2])
        const x = yield* g.input("x", "f32", [3, 2])
        const bound = yield* g.input("b", "f32", [2])
        const y = yield* g.output(Ops.add(Ops.mulMat(w, x), bound))
        const own = yield* device.bufferType.allocate(8)
        const plan = yield* backend.allocate(g, {
          leafBuffer: true,
          bindings: [{ tensor: bound, buffer: own, offset: 0 }]
        })
        // the compute, the leaf and the bound buffer
        assert.strictEqual(device.ledger.snapshot().buffers, before + 3)
        for (const t of [w, x, bound]) assert.isFalse(plan.layout.offsets.has(t.id), t.name)
        const [lw, lx, lb] = [w, x, bound].map((t) => plan.location(t)!)
        assert.strictEqual(lw.buffer, lx.buffer)
        assert.notStrictEqual(lw.buffer, plan.buffer)
        assert.strictEqual(lb.buffer, own)
        assert.isAtLeast(lx.offset, 24)
        yield* plan.set(w, [1, 2, 3, 4, 5, 6])
        yield* plan.set(x, [1, 0, 1, 0, 1, 1])
        yield* plan.set(bound, [0.5, -0.5])
        yield* backend.compute(plan)
        // w's rows (1 2 3) and (4 5 6) dotted with x's (1 0 1) and (0 1 1), plus the bias per row
        assert.deepStrictEqual(Array.from(yield* plan.get(y)), [4.5, 9.5, 5.5, 10.5])
        // read values are the caller's: decoded from a read's own bytes, they alias neither the plan nor the
        // next read, and a weight read back is unchanged by a write into the values
        const got = (yield* plan.get(y)) as Float32Array
        got.fill(0)
        assert.deepStrictEqual(Array.from(yield* plan.get(y)), [4.5, 9.5, 5.5, 10.5])
        const weights = (yield* plan.get(w)) as Float32Array
        weights[0] = 100
        assert.deepStrictEqual(Array.from(yield* plan.get(w)), [1, 2, 3, 4, 5, 6])
        // the CPU's default keeps leafs in the compute buffer; a backend made with leafBuffer does not
        const plain = yield* backend.allocate(g)
        for (const t of [w, x, bound]) assert.isTrue(plain.layout.offsets.has(t.id), t.name)
        assert.strictEqual(device.ledger.snapshot().buffers, before + 4)
        const apart = yield* (yield* device.makeBackend({ leafBuffer: true })).allocate(g)
        for (const t of [w, x, bound]) assert.isFalse(apart.layout.offsets.has(t.id), t.name)
        assert.strictEqual(device.ledger.snapshot().buffers, before + 6)
        // inputs and weights are pinned either way: moving them out costs no reuse, so the compute
        // buffer shrinks by what the leaf buffer holds
        const leafBytes = apart.location(w)!.buffer.size
        assert.strictEqual(apart.layout.size + leafBytes, plain.layout.size)
      }))
      assert.strictEqual(device.ledger.snapshot().buffers, before)
    }).pipe(cpu))

  it.scoped("Plan.bind spreads tensors over buffers within the largest a buffer type allows", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const base = device.bufferType
      // the CPU's buffer type, its largest buffer cut to 130 bytes: two 40-byte tensors in 32-byte slots
      const small = { ...base, maxSize: 130 }
      const ts = yield* Effect.forEach([0, 1, 2, 3], (i) => Tensor.make(`t${i}`, "f32", [10]))
      const bindings = yield* Plan.bind(small, ts)
      const buffers = [...new Set(bindings.map((b) => b.buffer))]
      assert.strictEqual(buffers.length, 2)
      assert.isTrue(buffers.every((b) => b.size <= 130))
      assert.deepStrictEqual(bindings.map((b) => b.tensor.name), ["t0", "t1", "t2", "t3"])
      // a tensor past one buffer fails before anything is allocated
      const before = device.ledger.snapshot().buffers
      const big = yield* Tensor.make("big", "f32", [40])
      const error = yield* Effect.flip(Plan.bind(small, [ts[0], big]))
      assert.strictEqual(error._tag, "AllocationError")
      assert.include(error.message, "big")
      assert.strictEqual(device.ledger.snapshot().buffers, before)
    }).pipe(cpu))

  it.scoped("bufferFromHost wraps host bytes without copying them", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const bytes = new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer)
      const buf = yield* device.bufferFromHost(bytes, { usage: "weights" })
      assert.strictEqual(buf.host, bytes)
      assert.strictEqual(buf.bufferType.kind, "mapped")
      const g = Graph.make()
      const w = yield* g.param("w", "f32", [4])
      const y = yield* g.output(Ops.scale(w, 10))
      const backend = yield* device.makeBackend()
      const plan = yield* backend.allocate(g, { bindings: [{ tensor: w, buffer: buf, offset: 0 }] })
      yield* backend.compute(plan)
      assert.deepStrictEqual(Array.from(yield* plan.get(y)), [10, 20, 30, 40])
      // the weight was never copied into the compute buffer
      assert.isFalse(plan.layout.offsets.has(w.id))
      const odd = yield* Effect.flip(device.bufferFromHost(new Uint8Array(9).subarray(1)))
      assert.strictEqual(odd._tag, "AllocationError")
    }).pipe(cpu))

  it.scoped("device props describe the CPU", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const props = yield* device.props
      assert.strictEqual(props.name, "CPU")
      assert.strictEqual(props.type, "CPU")
      assert.strictEqual(props.memory.total, 1 << 30)
      assert.isTrue(props.caps.events && props.caps.async && props.caps.bufferFromHostPtr)
      // the reference runs attention as any other op: a model's prompts take the chain
      assert.isFalse(props.caps.fusedAttention)
      const a = yield* Ops.mulMat(
        yield* Graph.make().input("a", "f32", [8, 64]),
        yield* Graph.make().input("b", "f32", [8, 64])
      )
      assert.isFalse(device.offloadOp(a))
      assert.isTrue(device.supportsOp(a))
      assert.isTrue(device.supportsBufferType(device.bufferType))
    }).pipe(Effect.provide(Cpu.layer({ memory: 1 << 30 }))))
})

describe("Trace", () => {
  it.scoped("formats a captured compute as a table and as JSON", () =>
    Effect.gen(function*() {
      const backend = yield* (yield* Registry.bestDevice).makeBackend()
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [8])
      yield* g.output(Ops.exp(Ops.neg(x)))
      const plan = yield* backend.allocate(g)
      const capture = yield* backend.captureNext
      yield* backend.compute(plan)
      const t = yield* capture
      const text = Trace.format(t)
      assert.match(text, /CPU \(CPU\): 2 dispatches/)
      assert.match(text, /neg\s+f32\[8,1,1,1\]\s+cpu:neg/)
      assert.deepStrictEqual(JSON.parse(Trace.toJson(t)).entries.map((e: { op: string }) => e.op), ["neg", "exp"])
    }).pipe(cpu))
})
