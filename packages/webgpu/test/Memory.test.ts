/**
 * WebGPU memory: private, shared and mapped buffers, allocation limits, and where plans put leafs.
 */
import { Cpu, GpuError, Graph, Ops, Registry } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { adapterAvailable, nmse } from "./utils.js"

describe.skipIf(!adapterAvailable)("WebGPU memory", () => {
  it.layer(WebGpu.layer({ devices: 1 }), { timeout: "120 seconds" })("one device", (it) => {
    const device = Registry.deviceByName("WebGPU0")

    it.scoped("private, shared and mapped buffers: set, get, memset, copy, clear, unaligned edges", () =>
      Effect.gen(function*() {
        const d = yield* device
        const kinds = d.bufferTypes.map((b) => b.kind)
        assert.deepStrictEqual(kinds, ["private", "shared", "mapped"])
        const bytes = Uint8Array.from({ length: 40 }, (_, i) => i + 1)
        for (const bt of d.bufferTypes.slice(0, 2)) {
          const b = yield* bt.allocate(64)
          yield* b.set(3, bytes)
          assert.deepStrictEqual(Array.from(yield* b.get(3, 40)), Array.from(bytes), bt.name)
          yield* b.memset(5, 7, 0xee)
          const got = yield* b.get(0, 16)
          assert.deepStrictEqual(Array.from(got.subarray(5, 12)), new Array(7).fill(0xee))
          assert.strictEqual(got[4], 2)
          assert.strictEqual(got[12], 10)
          const c = yield* bt.allocate(64)
          yield* c.copyFrom(b, 8, 16, 32)
          assert.deepStrictEqual(Array.from(yield* c.get(16, 32)), Array.from(yield* b.get(8, 32)))
          yield* c.clear(0)
          assert.deepStrictEqual(Array.from(yield* c.get(0, 64)), new Array(64).fill(0))
        }
        const host = new Uint8Array(new Float32Array([1, 2, 3, 4, 5]).buffer)
        const mapped = yield* d.bufferFromHost(host)
        assert.strictEqual(mapped.bufferType.kind, "mapped")
        assert.deepStrictEqual(Array.from(new Float32Array((yield* mapped.get(0, 20)).buffer)), [1, 2, 3, 4, 5])
        // a weight in a mapped buffer, used by a plan without a copy into the compute buffer
        const g = Graph.make()
        const w = yield* g.param("w", "f32", [5])
        const y = yield* g.output(Ops.scale(w, 2))
        const backend = yield* d.makeBackend()
        const plan = yield* backend.allocate(g, { bindings: [{ tensor: w, buffer: mapped, offset: 0 }] })
        const trace = yield* backend.captureNext
        yield* backend.compute(plan)
        assert.deepStrictEqual(Array.from(yield* plan.get(y)), [2, 4, 6, 8, 10])
        // the weight's own buffer is bound read-only, the result's read-write
        const [entry] = (yield* trace).entries
        assert.strictEqual(entry.access, "rw", entry.kernel)
        assert.include(entry.source ?? "", "var<storage, read> B0")
      }))

    it.scoped("AllocationError over the binding limit or the device memory; OutOfBounds for bad ranges", () =>
      Effect.gen(function*() {
        const d = yield* device
        const big = yield* Effect.flip(d.bufferType.allocate(d.bufferType.maxSize + 1))
        assert.instanceOf(big, GpuError.AllocationError)
        const b = yield* d.bufferType.allocate(32)
        assert.strictEqual((yield* Effect.flip(b.set(30, new Uint8Array(4))))._tag, "OutOfBounds")
        assert.strictEqual((yield* Effect.flip(b.get(0, 33)))._tag, "OutOfBounds")
      }))
  })

  it.scoped("a plan whose compute buffer does not fit fails with AllocationError and gives its leaf buffer back", () =>
    Effect.gen(function*() {
      const [d] = yield* WebGpu.make({ devices: 1, memory: 160 * 1024 })
      const backend = yield* d.makeBackend()
      const g = Graph.make()
      // 128 KiB of leafs fit; the 256 KiB result does not fit beside them
      const a = yield* g.param("a", "f32", [64, 256])
      const b = yield* g.input("b", "f32", [64, 256])
      yield* g.output(Ops.mulMat(a, b))
      const before = d.ledger.snapshot().buffers
      const e = yield* Effect.flip(Effect.scoped(backend.allocate(g)))
      assert.instanceOf(e, GpuError.AllocationError)
      // the compute buffer failed while the leaf buffer held its 128 KiB
      assert.strictEqual(e.requested, 256 * 1024)
      assert.strictEqual(e.available, 32 * 1024)
      assert.strictEqual(d.ledger.snapshot().buffers, before)
      assert.strictEqual((yield* d.memory).free, 160 * 1024)
    }))

  it.scoped(
    "leafs in a buffer of their own by default bind a product's inputs read-only; same results, buffers released",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        const backend = yield* d.makeBackend()
        const g = Graph.make()
        const a = yield* g.param("a", "f32", [128, 256])
        const b = yield* g.input("b", "f32", [128, 128])
        const y = yield* g.output(Ops.mulMat(a, b))
        const results: Array<Array<number>> = []
        const before = d.ledger.snapshot().buffers
        // undefined: the WebGPU backend's default, a leaf buffer
        for (const option of [undefined, false, true]) {
          const leafBuffer = option ?? true
          yield* Effect.scoped(Effect.gen(function*() {
            const plan = yield* backend.allocate(g, option === undefined ? undefined : { leafBuffer: option })
            assert.strictEqual(d.ledger.snapshot().buffers, before + (leafBuffer ? 2 : 1))
            yield* plan.set(a, Generators.values(1, 128 * 256))
            yield* plan.set(b, Generators.values(2, 128 * 128))
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            const [entry] = (yield* trace).entries
            // the access of a, b and the result: read_write while they share the compute buffer
            assert.strictEqual(entry.access, leafBuffer ? "rrw" : "www", entry.kernel)
            results.push(Array.from(yield* plan.get(y)))
          }))
          assert.strictEqual(d.ledger.snapshot().buffers, before)
        }
        // a backend made with leafBuffer false keeps leafs in the compute buffer
        const shared = yield* d.makeBackend({ leafBuffer: false })
        yield* Effect.scoped(Effect.gen(function*() {
          const plan = yield* shared.allocate(g)
          assert.strictEqual(d.ledger.snapshot().buffers, before + 1)
          yield* plan.set(a, Generators.values(1, 128 * 256))
          yield* plan.set(b, Generators.values(2, 128 * 128))
          const trace = yield* shared.captureNext
          yield* shared.compute(plan)
          assert.strictEqual((yield* trace).entries[0].access, "www")
          results.push(Array.from(yield* plan.get(y)))
        }))
        const cpu = yield* Cpu.make().makeBackend()
        const plan = yield* cpu.allocate(g)
        yield* plan.set(a, Generators.values(1, 128 * 256))
        yield* plan.set(b, Generators.values(2, 128 * 128))
        yield* cpu.compute(plan)
        const expected = Array.from(yield* plan.get(y))
        for (const r of results) assert.isBelow(nmse(r, expected), 1e-6)
      }),
    60_000
  )
})
