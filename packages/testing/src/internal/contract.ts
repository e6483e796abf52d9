/**
 * The behaviour every backend owes its users, beyond the numbers of each op: what can be read after a
 * compute, what happens after a scope closes, how a compute waits and stops, what bad indices and empty
 * or oversized tensors do, and how host data is taken. Registered with vitest by `ConformanceSuite`.
 *
 * @internal
 */
import type { Device } from "@effect-gpu/core/Device"
import * as GpuError from "@effect-gpu/core/GpuError"
import * as Graph from "@effect-gpu/core/Graph"
import * as Ops from "@effect-gpu/core/Ops"
import * as Registry from "@effect-gpu/core/Registry"
import type { Tensor } from "@effect-gpu/core/Tensor"
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Compare from "../Compare.js"
import * as Conformance from "../Conformance.js"
import * as Gen from "../Generators.js"

/** a chain of matmul + softmax layers: as long as asked, small enough per node for a CPU */
export const chain = (n: number, layers: number) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const x = yield* g.input("x", "f32", [n, n])
    let h: Tensor = x
    for (let i = 0; i < layers; i++) h = yield* Ops.softMax(Ops.mulMat(h, x), { scale: 0.2 })
    const y = yield* g.output(h)
    return { g, x, y }
  })

/** the result of a short chain on `device` */
export const computeOn = (device: Device, n: number, layers: number) =>
  Effect.gen(function*() {
    const backend = yield* device.makeBackend()
    const { g, x, y } = yield* chain(n, layers)
    const plan = yield* backend.allocate(g)
    yield* plan.set(x, Gen.values(11, n * n))
    yield* backend.compute(plan)
    return Array.from(yield* plan.get(y))
  })

/** wall-clock sleep: tests run under the TestClock */
export const realSleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

/** milliseconds `self` takes, with its value */
const timed = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const t0 = performance.now()
    const value = yield* self
    return { value, ms: performance.now() - t0 }
  })

/** the result of a small chain on `device` equals the CPU's */
const stillComputes = (device: Device) =>
  Effect.gen(function*() {
    const reference = yield* computeOn(yield* Conformance.referenceDevice, 8, 2)
    const after = yield* computeOn(device, 8, 2)
    assert.isBelow(Compare.nmse(after, reference), 1e-6)
  })

/** one test of the contract: its name and body, run against the device under test (by registry name) */
export interface Test {
  readonly name: string
  readonly run: <E>(device: Device, layer: Layer.Layer<Registry.Registry, E>) => Effect.Effect<void, unknown, never>
}

const test = (
  name: string,
  run: <E>(device: Device, layer: Layer.Layer<Registry.Registry, E>) => Effect.Effect<void, unknown, never>
): Test => ({ name, run })

/** @internal */
export const tests: ReadonlyArray<Test> = [
  test("an intermediate result cannot be read (NotAnOutput); outputs, inputs and weights can", (device) =>
    Effect.scoped(Effect.gen(function*() {
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [4, 3])
      const one = yield* g.param("one", "f32", [3, 3])
      const pre = yield* Ops.mulMat(x, x)
      const y = yield* g.output(Ops.add(Ops.softMax(pre), one))
      const backend = yield* device.makeBackend()
      const plan = yield* backend.allocate(g)
      yield* plan.set(x, Gen.values(1, 12))
      yield* plan.set(one, new Array(9).fill(1))
      yield* backend.compute(plan)
      const e = yield* Effect.flip(plan.get(pre))
      assert.instanceOf(e, GpuError.NotAnOutput)
      assert.match(e.message, /graph\.output/)
      const out = yield* plan.get(y)
      assert.strictEqual(out.length, 9)
      assert.deepStrictEqual(Array.from(yield* plan.get(one)), new Array(9).fill(1))
      assert.strictEqual((yield* plan.get(x)).length, 12)
    }))),

  test("a released buffer, plan, backend or device fails at once with Released; later calls are not blamed", (
    device,
    layer
  ) =>
    Effect.scoped(Effect.gen(function*() {
      const { g, x, y } = yield* chain(8, 2)
      const escaped = yield* Effect.scoped(Effect.gen(function*() {
        const backend = yield* device.makeBackend()
        const plan = yield* backend.allocate(g)
        const buffer = yield* device.bufferType.allocate(64)
        yield* plan.set(x, Gen.values(2, 64))
        yield* backend.compute(plan)
        return { backend, plan, buffer }
      }))
      const { backend, buffer, plan } = escaped
      for (
        const e of [
          yield* Effect.flip(buffer.get(0, 16)),
          yield* Effect.flip(buffer.set(0, new Uint8Array(4))),
          yield* Effect.flip(plan.get(y)),
          yield* Effect.flip(plan.set(x, Gen.values(3, 64))),
          yield* Effect.flip(backend.compute(plan)),
          yield* Effect.flip(backend.allocate(g)),
          yield* Effect.flip(backend.synchronize)
        ]
      ) {
        assert.instanceOf(e, GpuError.Released, String(e))
      }
      // a plan or an event released while its backend lives
      const live = yield* device.makeBackend()
      const event = yield* Effect.scoped(device.makeEvent)
      assert.instanceOf(yield* Effect.flip(live.recordEvent(event)), GpuError.Released)
      assert.instanceOf(yield* Effect.flip(live.waitEvent(event)), GpuError.Released)
      assert.instanceOf(yield* Effect.flip(event.synchronize), GpuError.Released)
      const gone = yield* Effect.scoped(live.allocate(g))
      assert.instanceOf(yield* Effect.flip(live.compute(gone)), GpuError.Released)
      assert.instanceOf(yield* Effect.flip(live.computeAsync(gone)), GpuError.Released)
      // nothing above is blamed on the next, unrelated work
      yield* stillComputes(device)
      yield* live.synchronize
      // a device whose layer has closed makes no more backends
      const closed = yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(layer)
        return yield* Effect.provide(Registry.deviceByName(device.name), context)
      }))
      assert.isTrue(closed.released)
      for (
        const e of [
          yield* Effect.flip(Effect.scoped(closed.makeBackend())),
          yield* Effect.flip(Effect.scoped(closed.makeEvent)),
          yield* Effect.flip(Effect.scoped(closed.bufferType.allocate(16))),
          yield* Effect.flip(Effect.scoped(closed.bufferFromHost(new Uint8Array(16))))
        ]
      ) {
        assert.instanceOf(e, GpuError.Released, String(e))
      }
    }))),

  test("compute returns once its results are ready; a long compute interrupted stops within a second", (device) =>
    Effect.scoped(Effect.gen(function*() {
      const backend = yield* device.makeBackend()
      const short = yield* chain(64, 40)
      const plan = yield* backend.allocate(short.g)
      yield* plan.set(short.x, Gen.values(4, 64 * 64))
      yield* backend.compute(plan)
      const computed = yield* timed(backend.compute(plan))
      const synced = yield* timed(backend.synchronize)
      // nothing of the compute is left for synchronize to wait for
      assert.isBelow(synced.ms, Math.max(5, computed.ms / 4), `compute ${computed.ms} ms, then ${synced.ms} ms`)
      // a graph of seconds: interrupted after 100 ms, it stops in well under a second, the device with it
      const long = yield* chain(160, 1000)
      const longPlan = yield* backend.allocate(long.g)
      yield* longPlan.set(long.x, Gen.values(5, 160 * 160))
      const fiber = yield* Effect.fork(backend.compute(longPlan))
      yield* realSleep(100)
      const interrupted = yield* timed(Fiber.interrupt(fiber))
      assert.isBelow(interrupted.ms, 1000, `interrupting took ${interrupted.ms} ms`)
      const drained = yield* timed(backend.synchronize)
      assert.isBelow(drained.ms, 1000, `the device was still busy ${drained.ms} ms after`)
      yield* stillComputes(device)
    }))),

  test("indices out of range: the host's fail at set (OutOfBounds); computed ones read zeros, drop writes", (device) =>
    Effect.scoped(Effect.gen(function*() {
      const g = Graph.make()
      const table = yield* g.input("table", "f32", [3, 4])
      const idx = yield* g.input("idx", "i32", [2])
      const scores = yield* g.input("scores", "f32", [6, 2])
      const src = yield* g.input("src", "f32", [3, 2])
      const picked = yield* g.output(Ops.getRows(table, idx), "picked")
      // argmax picks indices 2 and 5 on the device; the table has 4 rows
      const computed = yield* Ops.argmax(scores)
      const gathered = yield* g.output(Ops.getRows(table, computed), "gathered")
      const dst = yield* g.input("dst", "f32", [3, 4])
      const scattered = yield* g.output(Ops.setRows(dst, src, computed), "scattered")
      const backend = yield* device.makeBackend()
      const plan = yield* backend.allocate(g)
      for (const bad of [[1, 7], [1, -1], [0.5, 1]]) {
        const e = yield* Effect.flip(plan.set(idx, bad))
        assert.isTrue(e._tag === "OutOfBounds" || e._tag === "ShapeError", `${bad}: ${e._tag}`)
      }
      const rows = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
      yield* plan.set(table, rows)
      yield* plan.set(idx, [3, 0])
      yield* plan.set(scores, [0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 9])
      yield* plan.set(src, [-1, -2, -3, -4, -5, -6])
      yield* plan.set(dst, new Array(12).fill(0))
      yield* backend.compute(plan)
      assert.deepStrictEqual(Array.from(yield* plan.get(picked)), [10, 11, 12, 1, 2, 3])
      assert.deepStrictEqual(Array.from(yield* plan.get(gathered)), [7, 8, 9, 0, 0, 0])
      assert.deepStrictEqual(Array.from(yield* plan.get(scattered)), [0, 0, 0, 0, 0, 0, -1, -2, -3, 0, 0, 0])
    }))),

  test("zero-sized dimensions compute: mul_mat over K = 0 gives zeros, empty results are empty", (device) =>
    Effect.scoped(Effect.gen(function*() {
      const g = Graph.make()
      const a = yield* g.input("a", "f32", [0, 3])
      const b = yield* g.input("b", "f32", [0, 2])
      const e = yield* g.input("e", "f32", [5, 0])
      const y = yield* g.output(Ops.mulMat(a, b), "y")
      const z = yield* g.output(Ops.add(Ops.scale(e, 2), e), "z")
      const backend = yield* device.makeBackend()
      const plan = yield* backend.allocate(g)
      yield* plan.set(a, [])
      yield* plan.set(b, [])
      yield* backend.compute(plan)
      assert.deepStrictEqual(Array.from(yield* plan.get(y)), [0, 0, 0, 0, 0, 0])
      assert.deepStrictEqual(Array.from(yield* plan.get(z)), [])
    }))),

  test("a tensor larger than one buffer of the device fails allocation with its size and the limit", (device) =>
    Effect.scoped(Effect.gen(function*() {
      const limit = device.bufferType.maxSize
      const g = Graph.make()
      const w = yield* g.param("huge", "f32", [Math.ceil(limit / 4) + 64])
      yield* g.output(Ops.scale(w, 2))
      const backend = yield* device.makeBackend()
      const before = device.ledger.snapshot()
      const e = yield* Effect.flip(backend.allocate(g))
      assert.instanceOf(e, GpuError.AllocationError)
      assert.isAbove(e.requested, limit)
      assert.strictEqual(e.available, limit)
      assert.match(e.reason, /huge/)
      assert.deepStrictEqual(device.ledger.snapshot(), before)
    }))),

  test("plan.set converts values to the tensor's type; raw bytes go through setBytes", (device) =>
    Effect.scoped(Effect.gen(function*() {
      const g = Graph.make()
      const x = yield* g.input("pixels", "f32", [4])
      const i = yield* g.output(g.input("ids", "i32", [2]))
      yield* g.output(Ops.scale(x, 1))
      const backend = yield* device.makeBackend()
      const plan = yield* backend.allocate(g)
      yield* plan.set(x, new Uint8Array([1, 2, 3, 255]))
      assert.deepStrictEqual(Array.from(yield* plan.get(x)), [1, 2, 3, 255])
      const count = yield* Effect.flip(plan.set(x, new Uint8Array(16)))
      assert.match(count.message, /expected 4 values.*setBytes/)
      const fraction = yield* Effect.flip(plan.set(i, new Float32Array([1.5, 2])))
      assert.match(fraction.message, /integers/)
      yield* plan.setBytes(x, new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer))
      assert.deepStrictEqual(Array.from(yield* plan.get(x)), [1, 2, 3, 4])
      const raw = yield* plan.getBytes(x)
      assert.deepStrictEqual(Array.from(new Float32Array(raw.buffer, raw.byteOffset, 4)), [1, 2, 3, 4])
    })))
]
