import type { Device, Tensor } from "@effect-gpu/core"
import { Cpu, Float16, Fusion, GpuError, Graph, Ledger, Ops, Registry } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Layer, Option } from "effect"
import { adapterAvailable } from "./utils.js"

const gpu2 = WebGpu.layer({ devices: 2 })

/** a small two-layer graph: enough nodes and work to see ordering and aborts */
const mlp = (n: number, layers: number) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const x = yield* g.input("x", "f32", [n, n])
    let h: Tensor.Tensor = x
    for (let i = 0; i < layers; i++) h = yield* Ops.softMax(Ops.add(Ops.mulMat(h, x), x), { scale: 0.1 })
    const y = yield* g.output(h, "y")
    return { g, x, y }
  })

const runOn = (device: Device.Device, n: number, layers: number, seed: number, commandBuffers = 1) =>
  Effect.gen(function*() {
    const { g, x, y } = yield* mlp(n, layers)
    const backend = yield* device.makeBackend()
    const plan = yield* backend.allocate(g)
    yield* plan.set(x, Generators.values(seed, n * n))
    yield* backend.compute(plan, { commandBuffers })
    return Array.from(yield* plan.get(y))
  })

describe.skipIf(!adapterAvailable)("WebGPU capabilities", () => {
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
        const d0 = yield* Registry.deviceByName("WebGPU0")
        const d1 = yield* Registry.deviceByName("WebGPU1")
        const b0 = yield* d0.makeBackend()
        const b1 = yield* d1.makeBackend()
        const { g, x, y } = yield* mlp(32, 6)
        const p0 = yield* b0.allocate(g)
        const p1 = yield* b1.allocate(g)
        yield* p0.set(x, Generators.values(9, 1024))
        const ev = yield* d0.makeEvent
        yield* b0.computeAsync(p0)
        yield* b0.recordEvent(ev)
        yield* b1.waitEvent(ev)
        yield* b1.copyAsync(p0.location(y)!, p1.location(x)!)
        const want = Array.from(yield* p0.get(y))
        assert.deepStrictEqual(Array.from(yield* p1.get(x)), want)
        yield* ev.synchronize
      }))
  })

  it.layer(WebGpu.layer({ devices: 1 }), { timeout: "120 seconds" })("one device", (it) => {
    const device = Registry.deviceByName("WebGPU0")

    it.scoped("commandBuffers 1 and 4 give identical results", () =>
      Effect.gen(function*() {
        const d = yield* device
        const one = yield* runOn(d, 20, 9, 4, 1)
        const four = yield* runOn(d, 20, 9, 4, 4)
        assert.deepStrictEqual(one, four)
      }))

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
        assert.isTrue(entry.kernel.endsWith("|rw"), entry.kernel)
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

    it.scoped(
      "interrupting a compute stops it, leaks nothing, and the backend still works",
      () =>
        Effect.gen(function*() {
          const d = yield* device
          const before = WebGpuDevice.liveNativeBuffers(d)
          const ledgerBefore = d.ledger.snapshot()
          yield* Effect.scoped(Effect.gen(function*() {
            const backend = yield* d.makeBackend()
            const { g, x } = yield* mlp(96, 300)
            const plan = yield* backend.allocate(g)
            yield* plan.set(x, Generators.values(1, 96 * 96))
            const t0 = Date.now()
            yield* backend.compute(plan)
            const full = Date.now() - t0
            const t1 = Date.now()
            const fiber = yield* Effect.fork(backend.compute(plan))
            yield* realSleep(20)
            yield* Fiber.interrupt(fiber)
            assert.isBelow(Date.now() - t1, full * 0.75, `abort took ${Date.now() - t1} ms, a full compute ${full} ms`)
            // usable afterwards
            const small = yield* runOn(d, 8, 1, 2)
            const ref = yield* runOn(Cpu.make(), 8, 1, 2)
            assert.isBelow(nmse(small, ref), 1e-6)
          }))
          assert.strictEqual(WebGpuDevice.liveNativeBuffers(d), before)
          assert.deepStrictEqual(d.ledger.snapshot(), ledgerBefore)
        }),
      120_000
    )

    it.scoped("captureNext returns each dispatch with its WGSL and GPU time", () =>
      Effect.gen(function*() {
        const d = yield* device
        const backend = yield* d.makeBackend()
        const { g, x, y } = yield* mlp(16, 1)
        const plan = yield* backend.allocate(g)
        yield* plan.set(x, Generators.values(2, 256))
        const trace = yield* backend.captureNext
        yield* backend.compute(plan)
        const t = yield* trace
        assert.deepStrictEqual(t.entries.map((e) => e.op), ["mul_mat", "add", "soft_max"])
        for (const e of t.entries) {
          assert.include(e.source ?? "", "@compute")
          assert.isTrue(e.gpuTimeNs === undefined || e.gpuTimeNs >= 0)
        }
        // capture does not change the results
        const captured = Array.from(yield* plan.get(y))
        yield* backend.compute(plan)
        assert.deepStrictEqual(Array.from(yield* plan.get(y)), captured)
      }))

    it.scoped("matrix-vector loads vec4 where K and the offsets are 4-aligned, scalars otherwise", () =>
      Effect.gen(function*() {
        const d = yield* device
        // [K, view of b one element in (an offset that is not 4-aligned), the kernel expected on a GPU, on
        // a software adapter]: short rows keep scalar loads ("mvs" and the threads per row: one per 16
        // elements, 64 on a software adapter), and their keys never coincide with the vec4 kernel's
        const software = WebGpuDevice.isSoftware(d)
        const table: ReadonlyArray<readonly [number, boolean, string, string]> = [
          [1100, false, "mv4:", "mv4:"],
          [1024, true, "mvs64:", "mvs16:"],
          [256, false, "mvs16:", "mvs4:"],
          [100, false, "mvs4:", "mvs1:"],
          [37, false, "mvs2:", "mvs1:"]
        ]
        const cases = table.map(([K, offset, gpu, cpu]) => [K, offset, software ? cpu : gpu] as const)
        for (const [K, offset, kernel] of cases) {
          const g = Graph.make()
          const a = yield* g.param("a", "f32", [K, 19])
          const b = yield* g.input("b", "f32", [2 * K + 1])
          const y = yield* g.output(Ops.mulMat(a, Ops.view(b, [K, 2], [4 * K], offset ? 4 : 0)))
          const results: Array<Array<number>> = []
          for (const dev of [d, Cpu.make()]) {
            const backend = yield* dev.makeBackend()
            const plan = yield* backend.allocate(g.build())
            yield* plan.set(a, Generators.values(5, 19 * K))
            yield* plan.set(b, Generators.values(6, 2 * K + 1))
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            const entries = (yield* trace).entries.filter((e) => e.op === "mul_mat")
            if (dev === d) assert.isTrue(entries[0].kernel.startsWith(kernel), `K ${K}: ${entries[0].kernel}`)
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-6, `K ${K}`)
        }
      }))

    it.scoped("a software adapter gets bigger register tiles for mid-sized products; results unchanged", () =>
      Effect.gen(function*() {
        const d = yield* device
        const software = WebGpuDevice.isSoftware(d)
        // [result rows, columns, kernel on a GPU, on a software adapter]: 64x64 per workgroup on a GPU at
        // these sizes; 128x128 on a software adapter where both reach 128, else 128x64
        const table: ReadonlyArray<readonly [number, number, string, string]> = [
          [160, 136, "mm4:4x4:16", "mm4:8x8:8"],
          [160, 40, "mm4:4x4:16", "mm4:8x4:16"]
        ]
        for (const [M, N, gpu, cpu] of table) {
          const g = Graph.make()
          const a = yield* g.param("a", "f32", [64, M])
          const b = yield* g.input("b", "f32", [64, N])
          const y = yield* g.output(Ops.mulMat(a, b))
          const results: Array<Array<number>> = []
          for (const dev of [d, Cpu.make()]) {
            const backend = yield* dev.makeBackend()
            const plan = yield* backend.allocate(g.build())
            yield* plan.set(a, Generators.values(7, 64 * M))
            yield* plan.set(b, Generators.values(8, 64 * N))
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            const kernel = (yield* trace).entries[0].kernel
            if (dev === d) assert.isTrue(kernel.startsWith(software ? cpu : gpu), `${M}x${N}: ${kernel}`)
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-6, `${M}x${N}`)
        }
      }))

    it.scoped("a software adapter runs soft_max over 4-aligned rows with vec4 loads; results unchanged", () =>
      Effect.gen(function*() {
        const d = yield* device
        const software = WebGpuDevice.isSoftware(d)
        // [row length, view offset in elements, with a mask, the vec4 kernel expected on a software adapter]:
        // 1020 leaves the last vec4s of some threads outside the row; an offset of 2 binds misaligned, so
        // the scalar kernel runs; rows of 1022 and masked rows are scalar from the start
        const table: ReadonlyArray<readonly [number, number, boolean, boolean]> = [
          [1024, 0, false, true],
          [1020, 0, false, true],
          [1024, 4, false, true],
          [1024, 2, false, false],
          [1022, 0, false, false],
          [1024, 0, true, false]
        ]
        for (const [n, offset, masked, vec] of table) {
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [n * 3 + 4])
          const m = yield* g.input("m", "f32", [n, 3])
          const rows = Ops.view(x, [n, 3], [4 * n], 4 * offset)
          const y = yield* g.output(Ops.softMax(rows, masked ? { mask: m, scale: 0.5 } : { scale: 0.5 }))
          const results: Array<Array<number>> = []
          for (const dev of [d, Cpu.make()]) {
            const backend = yield* dev.makeBackend()
            const plan = yield* backend.allocate(g.build())
            yield* plan.set(x, Generators.values(11, n * 3 + 4))
            if (masked) yield* plan.set(m, Generators.values(12, n * 3))
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            const [entry] = (yield* trace).entries.filter((e) => e.op === "soft_max")
            if (dev === d) {
              assert.strictEqual(entry.kernel.includes(":v4:"), software && vec, `${n} ${offset}: ${entry.kernel}`)
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-10, `${n} ${offset} ${masked}`)
        }
      }))

    it.scoped("GPU times in traces are exact, not rounded to Dawn's 65.5 us quantum", () =>
      Effect.gen(function*() {
        const d = yield* device
        if (!d.description.includes("timestamp-query")) return
        const backend = yield* d.makeBackend()
        const { g, x } = yield* mlp(16, 1)
        const plan = yield* backend.allocate(g)
        yield* plan.set(x, Generators.values(3, 256))
        const times: Array<number> = []
        for (let k = 0; k < 3; k++) {
          const trace = yield* backend.captureNext
          yield* backend.compute(plan)
          for (const e of (yield* trace).entries) if (e.gpuTimeNs !== undefined) times.push(e.gpuTimeNs)
        }
        assert.isAbove(times.length, 0)
        // with timestamp_quantization on, every duration is a multiple of 2^16 ns (often 0)
        assert.isTrue(times.some((t) => t % 65536 !== 0), `all multiples of 65536 ns: ${times.join(", ")}`)
      }))

    it.scoped("f16 mul_mat runs on subgroup matrices exactly where the device offers them", () =>
      Effect.gen(function*() {
        const d = yield* device
        const g = Graph.make()
        const a = yield* g.param("a", "f16", [64, 48])
        const b = yield* g.input("b", "f16", [64, 40])
        const y = yield* g.output(Ops.mulMat(a, b))
        // without shader-f16 there is no f16 kernel at all, and the device says so
        if (!d.description.includes("shader-f16")) return assert.isFalse(d.supportsOp(y))
        const backend = yield* d.makeBackend()
        const plan = yield* backend.allocate(g.build())
        yield* plan.set(a, Generators.values(1, 64 * 48))
        yield* plan.set(b, Generators.values(2, 64 * 40))
        const trace = yield* backend.captureNext
        yield* backend.compute(plan)
        const [entry] = (yield* trace).entries
        const family = entry.kernel.split(":")[0]
        assert.strictEqual(family === "mmsg", WebGpuDevice.hasSubgroupMatrices(d), entry.kernel)
        console.log(`f16 mul_mat kernel on ${d.description}: ${entry.kernel}`)
        // and it computes the product (a's rows dotted with b's rows)
        const out = yield* plan.get(y)
        const [av, bv] = [Generators.values(1, 64 * 48), Generators.values(2, 64 * 40)]
        let err = 0
        let ref = 0
        for (let n = 0; n < 40; n++) {
          for (let m = 0; m < 48; m++) {
            let s = 0
            for (let k = 0; k < 64; k++) s += Float16.round(av[m * 64 + k]) * Float16.round(bv[n * 64 + k])
            err += (out[n * 48 + m] - s) ** 2
            ref += s * s
          }
        }
        assert.isBelow(err / ref, 1e-6)
      }))

    it.scoped("supportsOp and offloadOp answer like ggml's", () =>
      Effect.gen(function*() {
        const d = yield* device
        const g = Graph.make()
        const a = yield* g.input("a", "f32", [64, 64])
        const b32 = yield* g.input("b", "f32", [64, 32])
        const b8 = yield* g.input("c", "f32", [64, 8])
        assert.isTrue(d.offloadOp(yield* Ops.mulMat(a, b32)))
        assert.isFalse(d.offloadOp(yield* Ops.mulMat(a, b8)))
        assert.isTrue(d.supportsOp(yield* Ops.softMax(a)))
        const q = yield* g.input("q", "q8_0", [64, 2])
        assert.isFalse(d.supportsOp(yield* Ops.cont(q)))
        assert.isTrue(d.supportsBufferType(d.bufferType))
        assert.isFalse(d.supportsBufferType(Cpu.make().bufferType))
      }))

    it.scoped("fusions give the same results as the unfused graph", () =>
      Effect.gen(function*() {
        const d = yield* device
        // rows of 64 leave threads of a workgroup idle (guarded loads); rows of 256 fill every thread
        for (const W of [64, 256]) {
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [W, 7])
          const r = yield* g.input("r", "f32", [W, 7])
          const w = yield* g.param("w", "f32", [W])
          const wq = yield* g.param("wq", "f32", [W, 48])
          const bias = yield* g.param("bias", "f32", [48])
          const wg = yield* g.param("wg", "f32", [48, 48])
          const h = yield* Ops.mul(Ops.rmsNorm(Ops.add(x, r), 1e-6), w) // add + rms_norm + mul
          const n2 = yield* Ops.mul(Ops.rmsNorm(h, 1e-6), w) // rms_norm + mul
          const q = yield* Ops.add(Ops.mulMat(wq, n2), bias) // mul_mat + bias
          const gate = yield* Ops.mulMat(wg, q)
          const y = yield* g.output(Ops.mul(Ops.silu(q), gate), "y") // silu * gate -> swiglu
          const graph = g.build()
          const fused = Fusion.optimize(graph)
          const tags = fused.nodes.map((n) => n.op._tag)
          assert.includeMembers(tags, ["AddRmsNorm", "RmsNormMul", "MulMatAdd", "Glu"])
          assert.isBelow(fused.nodes.length, graph.nodes.length)
          const backend = yield* d.makeBackend()
          assert.strictEqual(backend.optimize(graph).nodes.length, fused.nodes.length)
          const data = new Map<Tensor.Tensor, Float32Array>([
            [x, Generators.values(1, W * 7)],
            [r, Generators.values(2, W * 7)],
            [w, Generators.values(3, W)],
            [wq, Generators.values(4, W * 48)],
            [bias, Generators.values(5, 48)],
            [wg, Generators.values(6, 48 * 48)]
          ])
          const run = (gr: Graph.Graph) =>
            Effect.gen(function*() {
              const plan = yield* backend.allocate(gr)
              for (const [t, v] of data) yield* plan.set(t, v)
              yield* backend.compute(plan)
              return Array.from(yield* plan.get(y))
            })
          const plain = yield* run(graph)
          const optimized = yield* run(fused)
          assert.isBelow(nmse(optimized, plain), 1e-10)
          const cpuBackend = yield* Cpu.make().makeBackend()
          const cpuPlan = yield* cpuBackend.allocate(fused)
          for (const [t, v] of data) yield* cpuPlan.set(t, v)
          yield* cpuBackend.compute(cpuPlan)
          assert.isBelow(nmse(optimized, Array.from(yield* cpuPlan.get(y))), 5e-4)
        }
      }))

    it.scoped("chains of element-wise ops run as one kernel and match the CPU", () =>
      Effect.gen(function*() {
        const d = yield* device
        const g = Graph.make()
        const x = yield* g.input("x", "f32", [64, 9])
        const c = yield* g.input("c", "f32", [64, 9])
        const row = yield* g.input("row", "f32", [64])
        const steps = [
          (t: Tensor.Tensor) => Ops.add(t, c),
          (t: Tensor.Tensor) => Ops.mul(t, row),
          (t: Tensor.Tensor) => Ops.scale(t, 0.7),
          (t: Tensor.Tensor) => Ops.silu(t),
          (t: Tensor.Tensor) => Ops.clamp(t, -2, 2),
          (t: Tensor.Tensor) => Ops.sub(t, c),
          (t: Tensor.Tensor) => Ops.tanh(t)
        ]
        let t: Tensor.Tensor = x
        for (let i = 0; i < 60; i++) t = yield* steps[(i * 5) % steps.length](t)
        const mid = yield* g.output(Ops.exp(Ops.scale(t, 0.1)), "mid") // an output ends a chain
        const y = yield* g.output(Ops.div(Ops.add(mid, c), row), "y")
        const results: Array<Array<number>> = []
        for (const dev of [d, Cpu.make()]) {
          const backend = yield* dev.makeBackend()
          const plan = yield* backend.allocate(g)
          yield* plan.set(x, Generators.values(1, 576))
          yield* plan.set(c, Generators.values(2, 576))
          yield* plan.set(row, Generators.values(3, 64, { positive: true }))
          const trace = yield* backend.captureNext
          yield* backend.compute(plan)
          const entries = (yield* trace).entries
          if (dev === d) {
            assert.isBelow(entries.length, 5, entries.map((e) => e.kernel.split("|")[0]).join(" "))
            assert.isTrue(entries.some((e) => e.kernel.startsWith("chain:")))
          }
          results.push([...Array.from(yield* plan.get(mid)), ...Array.from(yield* plan.get(y))])
        }
        assert.isBelow(nmse(results[0], results[1]), 1e-10)
      }))

    it.scoped("in-place results from the allocator match the CPU", () =>
      Effect.gen(function*() {
        const d = yield* device
        const g = Graph.make()
        const x = yield* g.input("x", "f32", [33, 5])
        const b = yield* g.input("b", "f32", [33, 1])
        const pos = yield* g.input("pos", "i32", [5])
        let t = yield* Ops.exp(Ops.scale(x, 0.5))
        t = yield* Ops.add(t, b)
        t = yield* Ops.mul(t, t)
        t = yield* Ops.rmsNorm(t, 1e-6)
        t = yield* Ops.softMax(Ops.silu(t))
        const r = yield* Ops.reshape(Ops.cont(t), [33, 1, 5])
        const y = yield* g.output(Ops.rope(Ops.cont(Ops.diagMaskInf(Ops.scale(r, 2), 40)), pos, { nDims: 32 }))
        const results: Array<Array<number>> = []
        for (const dev of [d, Cpu.make()]) {
          const backend = yield* dev.makeBackend()
          const plan = yield* backend.allocate(g)
          assert.isAbove(plan.layout.inPlace.size, 3)
          yield* plan.set(x, Generators.values(1, 165))
          yield* plan.set(b, Generators.values(2, 33))
          yield* plan.set(pos, [0, 3, 9, 27, 81])
          yield* backend.compute(plan)
          results.push(Array.from(yield* plan.get(y)))
        }
        assert.isBelow(nmse(results[0], results[1]), 1e-6)
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
  })

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

  // every mul_mat tiling the kernels may pick (by size, or for tuning) against the CPU: ragged edges in M,
  // N and K, and whole blocks (loaded without bounds checks), a batch broadcast, f32 and f16 x f16
  // (subgroup matrices where offered)
  const tilings: ReadonlyArray<WebGpu.Options> = [
    { registerTile: { m: 4, n: 4, depth: 16 } },
    { registerTile: { m: 4, n: 8, depth: 16 } },
    { registerTile: { m: 8, n: 4, depth: 16 } },
    { registerTile: { m: 8, n: 8, depth: 16, unroll: true } },
    {
      registerTile: { m: 8, n: 8, depth: 8 },
      matrixTile: { sgRows: 2, sgCols: 4, fragRows: 4, fragCols: 2, depth: 32 }
    },
    { matrixTile: { sgRows: 2, sgCols: 2, fragRows: 2, fragCols: 4, depth: 64 } },
    { matrixTile: { sgRows: 2, sgCols: 4, fragRows: 4, fragCols: 2, depth: 64 } },
    { matrixTile: { sgRows: 2, sgCols: 4, fragRows: 4, fragCols: 4, depth: 32 } },
    { matrixTile: { sgRows: 4, sgCols: 2, fragRows: 4, fragCols: 4, depth: 32 } },
    { matrixTile: { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 4, depth: 32 } },
    { matrixTile: { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 4, depth: 64 } },
    { matrixTile: { sgRows: 1, sgCols: 1, fragRows: 4, fragCols: 4, depth: 16 } }
  ]
  for (const options of tilings) {
    it.scoped(`mul_mat with tiles ${JSON.stringify(options)} matches the CPU`, () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1, ...options })
        const f16 = d.description.includes("shader-f16")
        // [K, M, N, the loads]: M = N = 256, K = 128 is whole blocks for every tiling listed
        const shapes = [[136, 150, 141, "edges"], [128, 256, 256, "whole"]] as const
        for (const dtype of f16 ? (["f32", "f16"] as const) : (["f32"] as const)) {
          for (const [K, M, N, loads] of shapes) {
            const g = Graph.make()
            const a = yield* g.param("a", dtype, [K, M, 2])
            const b = yield* g.input("b", dtype, [K, N, 4])
            const y = yield* g.output(Ops.mulMat(a, b))
            const results: Array<Array<number>> = []
            for (const dev of [d, Cpu.make()]) {
              const backend = yield* dev.makeBackend()
              const plan = yield* backend.allocate(g.build())
              yield* plan.set(a, Generators.values(1, K * M * 2))
              yield* plan.set(b, Generators.values(2, K * N * 4))
              const trace = yield* backend.captureNext
              yield* backend.compute(plan)
              const [entry] = (yield* trace).entries
              if (dev === d && dtype === "f32") {
                assert.isTrue(
                  entry.kernel.startsWith("mm4:") && entry.kernel.split("|")[0].endsWith(`:${loads}`),
                  entry.kernel
                )
              }
              if (dev === d && dtype === "f16") {
                assert.strictEqual(entry.kernel.startsWith("mmsg:"), WebGpuDevice.hasSubgroupMatrices(d), entry.kernel)
                if (WebGpuDevice.hasSubgroupMatrices(d)) assert.isTrue(entry.kernel.split("|")[0].endsWith(`:${loads}`))
              }
              results.push(Array.from(yield* plan.get(y)))
            }
            assert.isBelow(nmse(results[0], results[1]), 5e-4, `${dtype} ${K}x${M}x${N}`)
          }
        }
      }), 60_000)
  }

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
            assert.isTrue(entry.kernel.endsWith(leafBuffer ? "|rrw" : "|www"), entry.kernel)
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
          assert.isTrue((yield* trace).entries[0].kernel.endsWith("|www"))
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

  it.scoped(
    "f16 mul_mat on subgroup matrices loads 16 bytes where K and the offsets allow, else 8, else 2",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        if (!d.description.includes("shader-f16")) return
        // [K, b viewed this many elements in, the load form on subgroup matrices]: an offset of 4 binds wide
        // operands at the wrong alignment, so the 8-byte form runs
        const table: ReadonlyArray<readonly [number, number, string]> = [
          [136, 0, ":w:"],
          [136, 8, ":w:"],
          [136, 4, ":v:"],
          [132, 0, ":v:"],
          [130, 0, ":s:"]
        ]
        for (const [K, offset, form] of table) {
          const g = Graph.make()
          const a = yield* g.param("a", "f16", [K, 48])
          const b = yield* g.input("b", "f16", [K * 40 + 8])
          const y = yield* g.output(Ops.mulMat(a, Ops.view(b, [K, 40], [2 * K], 2 * offset)))
          const results: Array<Array<number>> = []
          for (const dev of [d, Cpu.make()]) {
            const backend = yield* dev.makeBackend()
            const plan = yield* backend.allocate(g.build())
            yield* plan.set(a, Generators.values(7, K * 48))
            yield* plan.set(b, Generators.values(8, K * 40 + 8))
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            const [entry] = (yield* trace).entries.filter((e) => e.op === "mul_mat")
            if (dev === d && WebGpuDevice.hasSubgroupMatrices(d)) {
              assert.include(entry.kernel, form, `K ${K}, offset ${offset}: ${entry.kernel}`)
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 5e-4, `K ${K}, offset ${offset}`)
        }
      }),
    60_000
  )

  it.effect("layer fails with NoAdapter when no adapter matches", () =>
    Effect.gen(function*() {
      const e = yield* Effect.flip(Layer.build(WebGpu.layer({ adapter: "no such adapter" })).pipe(Effect.scoped))
      assert.strictEqual(e._tag, "NoAdapter")
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
})

/** wall-clock sleep: the layer's tests run under the TestClock */
const realSleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

const nmse = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => {
  let num = 0
  let den = 0
  for (let i = 0; i < b.length; i++) {
    num += (a[i] - b[i]) ** 2
    den += b[i] ** 2
  }
  return num / den
}
