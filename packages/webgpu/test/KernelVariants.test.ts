/**
 * Which kernel variant runs, on the adapter at hand, and that each matches the CPU: matrix-vector loads,
 * register and subgroup-matrix tilings, vec4 rows on software adapters, and what the device supports.
 */
import type { Tensor } from "@effect-gpu/core"
import { Cpu, Float16, Fusion, Graph, Ops, Quant, Registry } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { adapterAvailable, nmse } from "./utils.js"

describe.skipIf(!adapterAvailable)("WebGPU kernel variants", () => {
  it.layer(WebGpu.layer({ devices: 1 }), { timeout: "120 seconds" })("one device", (it) => {
    const device = Registry.deviceByName("WebGPU0")

    it.scoped("matrix-vector loads vec4 where K and the offsets are 4-aligned, scalars otherwise", () =>
      Effect.gen(function*() {
        const d = yield* device
        // [K, view of b one element in (an offset that is not 4-aligned), the kernel expected on a GPU, on
        // a software adapter]: short rows keep scalar loads (and the threads per row: one per 16 elements,
        // 64 on a software adapter)
        const software = WebGpuDevice.isSoftware(d)
        const table: ReadonlyArray<readonly [number, boolean, string, string]> = [
          [1100, false, "vec4", "vec4"],
          [1024, true, "scalar 64", "scalar 16"],
          [256, false, "scalar 16", "scalar 4"],
          [100, false, "scalar 4", "scalar 1"],
          [37, false, "scalar 2", "scalar 1"]
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
            const v = entries[0].variant
            const form = v === undefined ? "" : v.vec4 ? "vec4" : `scalar ${v.threadsPerRow}`
            if (dev === d) assert.strictEqual(form, kernel, `K ${K}: ${entries[0].kernel}`)
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-6, `K ${K}`)
        }
      }))

    // f16 weights by subgroups (mvh: 16-byte loads of 8 values, a subgroup's two rows, rows past M in the
    // last workgroup): 1 and 3 columns, a bias (mul_mat_add), b's batches over a's; a view of a one row in
    // (offsets not 16-byte aligned) falls back to the vec4 form, K not a multiple of 8 never takes it
    it.scoped("f16 matrix-vector by subgroups (mvh) matches the CPU, and falls back where it cannot load 16 bytes", () =>
      Effect.gen(function*() {
        const d = yield* device
        const subgroups = d.description.includes("subgroups")
        // [K, rows, columns, a viewed a row in, bias, the kernel on a device with subgroups, its rows a
        // subgroup]: two rows a subgroup once that gives 256 workgroups or more
        const table: ReadonlyArray<readonly [number, number, number, boolean, boolean, string, number]> = [
          [1024, 33, 1, false, false, "mvh", 1],
          [264, 33, 3, false, true, "mvh", 1],
          [64, 4111, 1, false, true, "mvh", 2],
          [1028, 33, 1, true, false, "mv", 0],
          [100, 33, 2, false, false, "mv", 0]
        ]
        for (const [K, M, N, shifted, withBias, want, rows] of table) {
          const g = Graph.make()
          const a = yield* g.param("a", "f16", [K, M + 2])
          const b = yield* g.input("b", "f32", [K, N, 2])
          const c = yield* g.param("c", "f32", [M])
          const w = shifted ? Ops.view(a, [K, M], [a.nb[1]], a.nb[1]) : Ops.view(a, [K, M], [a.nb[1]], 0)
          const p = Ops.mulMat(w, b)
          const y = yield* g.output(withBias ? Ops.add(p, c) : p)
          const results: Array<Array<number>> = []
          for (const dev of [d, Cpu.make()]) {
            const backend = yield* dev.makeBackend()
            const plan = yield* backend.allocate(backend.optimize(g.build()))
            yield* plan.set(a, Generators.values(5, (M + 2) * K))
            yield* plan.set(b, Generators.values(6, K * N * 2))
            if (withBias) yield* plan.set(c, Generators.values(7, M))
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            if (dev === d) {
              const entry = (yield* trace).entries.find((e) => e.op === "mul_mat" || e.op === "mul_mat_add")!
              assert.strictEqual(entry.variant?.family, subgroups ? want : "mv", `K ${K}: ${entry.kernel}`)
              if (subgroups && want === "mvh") assert.strictEqual(entry.variant?.rows, rows, entry.kernel)
            }
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
          [160, 136, "mm4 4x4:16", "mm4 8x8:8"],
          [160, 40, "mm4 4x4:16", "mm4 8x4:16"]
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
            const v = (yield* trace).entries[0].variant
            const kernel = v === undefined ? "" : `${v.family} ${v.m}x${v.n}:${v.depth}`
            if (dev === d) assert.strictEqual(kernel, software ? cpu : gpu, `${M}x${N}`)
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
              const vec4 = String(entry.variant?.form).startsWith("v4")
              assert.strictEqual(vec4, software && vec, `${n} ${offset}: ${entry.kernel}`)
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-10, `${n} ${offset} ${masked}`)
        }
      }))

    // against f16 b and against f32 b (a prompt's activations, rounded to f16 as they are staged: four
    // values a load, or one where K is odd)
    it.scoped("f16 mul_mat runs on subgroup matrices exactly where the device offers them", () =>
      Effect.gen(function*() {
        const d = yield* device
        for (const [K, type] of [[64, "f16"], [64, "f32"], [63, "f32"]] as const) {
          const g = Graph.make()
          const a = yield* g.param("a", "f16", [K, 48])
          const b = yield* g.input("b", type, [K, 40])
          const y = yield* g.output(Ops.mulMat(a, b))
          // without shader-f16 there is no f16 kernel at all, and the device says so
          if (!d.description.includes("shader-f16")) return assert.isFalse(d.supportsOp(y))
          const backend = yield* d.makeBackend()
          const plan = yield* backend.allocate(g.build())
          yield* plan.set(a, Generators.values(1, K * 48))
          yield* plan.set(b, Generators.values(2, K * 40))
          const trace = yield* backend.captureNext
          yield* backend.compute(plan)
          const [entry] = (yield* trace).entries
          const matrices = WebGpuDevice.hasSubgroupMatrices(d)
          assert.strictEqual(entry.variant?.family === "mmsg", matrices, entry.kernel)
          if (matrices) assert.strictEqual(entry.variant?.b, type, entry.kernel)
          console.log(`f16 x ${type} mul_mat kernel (K ${K}) on ${d.description}: ${entry.kernel}`)
          // and it computes the product (a's rows dotted with b's rows)
          const out = yield* plan.get(y)
          const [av, bv] = [Generators.values(1, K * 48), Generators.values(2, K * 40)]
          let err = 0
          let ref = 0
          for (let n = 0; n < 40; n++) {
            for (let m = 0; m < 48; m++) {
              let s = 0
              for (let k = 0; k < K; k++) s += Float16.round(av[m * K + k]) * Float16.round(bv[n * K + k])
              err += (out[n * 48 + m] - s) ** 2
              ref += s * s
            }
          }
          assert.isBelow(err / ref, 1e-6, `K ${K} ${type}`)
        }
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
  })

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
    { matrixTile: { sgRows: 1, sgCols: 1, fragRows: 4, fragCols: 4, depth: 16 } },
    // the small tiling (products with few workgroups)
    { matrixTile: { sgRows: 2, sgCols: 1, fragRows: 2, fragCols: 4, depth: 32 } },
    // K split over 3 and 2 workgroups a block (their partials added by a second dispatch)
    { matrixTile: { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 4, depth: 32, splits: 3 } },
    { matrixTile: { sgRows: 2, sgCols: 1, fragRows: 2, fragCols: 4, depth: 32, splits: 2 } }
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
              const v = entry.variant
              if (dev === d && dtype === "f32") {
                assert.deepInclude(v, { family: "mm4", whole: loads === "whole" }, entry.kernel)
              }
              if (dev === d && dtype === "f16") {
                assert.strictEqual(v?.family === "mmsg", WebGpuDevice.hasSubgroupMatrices(d), entry.kernel)
                if (WebGpuDevice.hasSubgroupMatrices(d)) assert.strictEqual(v?.whole, loads === "whole", entry.kernel)
              }
              results.push(Array.from(yield* plan.get(y)))
            }
            assert.isBelow(nmse(results[0], results[1]), 5e-4, `${dtype} ${K}x${M}x${N}`)
          }
        }
      }), 60_000)
  }

  // the quantized decode kernels in the shapes GPUs get (2 rows per lane group, several columns, b staged
  // several chunks at a time, the last stage and chunk partly past K; a's rows staged by 16-byte loads),
  // which a software adapter runs only when forced: a 32-value block type and a 256-value one, batches
  // broadcast
  const decodeForms = [
    { family: "mvq", decode: { rows: 2, columns: 2, stage: 2, staged: false }, K: { q4_0: 2560, q6_K: 2560 } },
    // 2048 q6_K values are the fewest whose rows are whole 16-byte words; one row per lane group, so that
    // q6_K's two chunks of a (8 x 1680 bytes) and of b fit lavapipe's 32 KiB
    { family: "mvqs", decode: { rows: 1, columns: 2, staged: true }, K: { q4_0: 2560, q6_K: 2048 } }
  ] as const
  for (const form of decodeForms) {
    it.scoped(
      `quantized matrix-vector products in the GPU shape (${form.family}) match the CPU`,
      () =>
        Effect.gen(function*() {
          const [d] = yield* WebGpu.make({ devices: 1, quantizedDecode: form.decode })
          for (const dtype of ["q4_0", "q6_K"] as const) {
            const K = form.K[dtype]
            const g = Graph.make()
            const a = yield* g.param("a", dtype, [K, 37, 2])
            const b = yield* g.input("b", "f32", [K, 2, 4])
            const y = yield* g.output(Ops.mulMat(a, b))
            const results: Array<Array<number>> = []
            for (const dev of [d, Cpu.make()]) {
              const backend = yield* dev.makeBackend()
              const plan = yield* backend.allocate(g.build())
              yield* plan.set(a, Quant.unsafeQuantize(dtype, Generators.values(3, K * 37 * 2)))
              yield* plan.set(b, Generators.values(4, K * 2 * 4))
              const trace = yield* backend.captureNext
              yield* backend.compute(plan)
              const [entry] = (yield* trace).entries
              if (dev === d) {
                assert.deepInclude(
                  entry.variant,
                  { family: form.family, rows: form.decode.rows, columns: 2 },
                  entry.kernel
                )
              }
              results.push(Array.from(yield* plan.get(y)))
            }
            // the CPU rounds activations to q8_0 / q8_K blocks as ggml's CPU does; these kernels keep them f32
            assert.isBelow(nmse(results[0], results[1]), 5e-5, dtype)
          }
        }),
      120_000
    )
  }

  // the int8 form of q4_0 and q8_0 decode: b rounded to q8_0 in workgroup memory as the CPU rounds it, so
  // the two agree to f32 summation order; odd rows (a subgroup's second row past the end), batches
  // broadcast, a bias, and a's rows viewed one row in (bytes off 16) falling back to the f32 form
  it.scoped(
    "quantized matrix-vector products in the int8 form (mvq8) match the CPU, or fall back",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        if (!WebGpuDevice.hasInt8Dot(d)) {
          console.log(`no dot4I8Packed on ${d.description}: the int8 form is not offered`)
          return
        }
        for (const dtype of ["q4_0", "q8_0"] as const) {
          // [K, a viewed one row in, b's batches K + 1 apart (read a value at a time), the kernel]
          const cases = [[2560, false, false, "mvq8"], [2624, true, false, "mvq"], [640, false, true, "mvq8"]] as const
          for (const [K, viewed, strided, family] of cases) {
            const g = Graph.make()
            const a = yield* g.param("a", dtype, [K, 38, 2])
            const a1 = Ops.view(a, [K, 37, 2], [a.nb[1], a.nb[2]], viewed ? a.nb[1] : 0)
            const bs = yield* g.input("b", "f32", [(K + 1) * 4])
            const b = Ops.view(bs, [K, 1, 4], [4 * K, 4 * (strided ? K + 1 : K)], 0)
            const c = yield* g.param("c", "f32", [37, 1, 4])
            const y = yield* g.output(Ops.add(Ops.mulMat(a1, b), c))
            const results: Array<Array<number>> = []
            for (const dev of [d, Cpu.make()]) {
              const backend = yield* dev.makeBackend()
              const plan = yield* backend.allocate(g.build())
              yield* plan.set(a, Quant.unsafeQuantize(dtype, Generators.values(3, K * 38 * 2)))
              yield* plan.set(bs, Generators.values(4, (K + 1) * 4))
              yield* plan.set(c, Generators.values(5, 37 * 4))
              const trace = yield* backend.captureNext
              yield* backend.compute(plan)
              const entries = (yield* trace).entries
              if (dev === d) {
                assert.deepInclude(entries[0].variant, { family, dtype }, `${dtype} K ${K}`)
                if (family === "mvq8") assert.strictEqual(entries[0].variant?.fours, !strided)
              }
              results.push(Array.from(yield* plan.get(y)))
            }
            assert.isBelow(nmse(results[0], results[1]), family === "mvq8" ? 1e-9 : 5e-5, `${dtype} K ${K}`)
          }
        }
      }),
    120_000
  )

  // a gated FFN's two products and swiglu in one node: the int8 form (both weights, b rounded once) where it
  // applies, f16 weights by subgroups (16-byte loads), the vec4 matrix-vector form for f32 weights with K of
  // 1024 and more, and a workgroup per result elsewhere (forced here with any weight type), batches broadcast
  it.scoped(
    "a gated FFN's products fused (mul_mat_swiglu) match the CPU's unfused graph",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        const int8 = WebGpuDevice.hasInt8Dot(d)
        // f16 weights by subgroups where the device has them (lavapipe and GPUs), else the vec4 form
        const half = d.description.includes("subgroups") ? "mvh_swiglu" : "mv_swiglu"
        const rowsForm = "mul_mat_swiglu_rows"
        // [weights, K, the kernel]: the device fuses where it is not the row form
        const cases = [
          ["q4_0", 640, int8 ? "mvq8_swiglu" : rowsForm],
          ["q8_0", 2560, int8 ? "mvq8_swiglu" : rowsForm],
          ["q4_K", 512, rowsForm],
          ["f32", 100, rowsForm],
          ["f16", 1024, half],
          ["f16", 40, half === "mvh_swiglu" ? half : rowsForm],
          ["f32", 1028, "mv_swiglu"]
        ] as const
        for (const [dtype, K, family] of cases) {
          const fast = family !== rowsForm
          const g = Graph.make()
          const gate = yield* g.param("gate", dtype, [K, 37])
          const up = yield* g.param("up", dtype, [K, 37])
          const x = yield* g.input("x", "f32", [K, 1, 3])
          const y = yield* g.output(Ops.swiglu(Ops.mulMat(gate, x), Ops.mulMat(up, x)))
          const graph = g.build()
          const backend = yield* d.makeBackend()
          // the device asks for the fusion exactly where the int8 form computes it
          assert.strictEqual(backend.optimize(graph).nodes.some((n) => n.op._tag === "MulMatSwiglu"), fast, dtype)
          const fused = Fusion.optimize(graph, { mulMatSwiglu: () => true })
          const results: Array<Array<number>> = []
          for (const [dev, h] of [[d, fused], [Cpu.make(), graph]] as const) {
            const b = yield* dev.makeBackend()
            const plan = yield* b.allocate(h)
            for (const [t, seed] of [[gate, 3], [up, 4]] as const) {
              const v = Generators.values(seed, K * 37)
              yield* plan.set(t, dtype === "f32" || dtype === "f16" ? v : Quant.unsafeQuantize(dtype, v))
            }
            yield* plan.set(x, Generators.values(5, K * 3))
            const trace = yield* b.captureNext
            yield* b.compute(plan)
            const entries = (yield* trace).entries
            if (dev === d) {
              assert.strictEqual(entries.length, 1, dtype)
              assert.strictEqual(entries[0].variant?.family, family, `${dtype} K ${K}`)
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          // the int8 form rounds b as the CPU does; the other forms keep b in f32
          assert.isBelow(nmse(results[0], results[1]), family === "mvq8_swiglu" ? 1e-9 : 5e-5, `${dtype} K ${K}`)
        }
      }),
    120_000
  )

  // products sharing their activations stacked (attention's q, k, v): the int8 form with a part per row range
  // (parts of 40, 8 and 9 rows: a lane group's two rows straddle a boundary; parts of 48, 16 and 32 rows,
  // whole workgroups of 16, each workgroup reading its part alone) where it applies, f16 weights by
  // subgroups (a subgroup's two rows straddling parts too; K a multiple of 8), the vec4 matrix-vector form
  // for f32 weights with K of 1024 and more, and a workgroup per result elsewhere; each product read back
  // through its view
  it.scoped(
    "products stacked over shared activations (mul_mat_stack) match the CPU's separate products",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        const int8 = WebGpuDevice.hasInt8Dot(d)
        const half = d.description.includes("subgroups") ? "mvh_stack" : "mv_stack"
        const rowsForm = "mul_mat_stack_rows"
        // [weights, K, the kernel]: the device stacks where it is not the row form
        const straddling = [40, 8, 9] as const
        const whole = [48, 16, 32] as const
        const cases = [
          ["q4_0", 640, int8 ? "mvq8_stack" : rowsForm, straddling],
          ["q8_0", 2560, int8 ? "mvq8_stack" : rowsForm, straddling],
          ["q4_0", 640, int8 ? "mvq8_stack" : rowsForm, whole],
          ["q8_0", 2560, int8 ? "mvq8_stack" : rowsForm, whole],
          ["q6_K", 512, rowsForm, straddling],
          ["f16", 98, rowsForm, straddling],
          ["f16", 96, half === "mvh_stack" ? half : rowsForm, straddling],
          ["f16", 1024, half, straddling],
          ["f32", 1028, "mv_stack", straddling]
        ] as const
        for (const [dtype, K, family, rows] of cases) {
          const fast = family !== rowsForm
          const g = Graph.make()
          const ws = [
            yield* g.param("wq", dtype, [K, rows[0]]),
            yield* g.param("wk", dtype, [K, rows[1]]),
            yield* g.param("wv", dtype, [K, rows[2]])
          ]
          const x = yield* g.input("x", "f32", [K, 1])
          const ys: Array<Tensor.Tensor> = []
          for (const w of ws) ys.push(yield* g.output(Ops.scale(Ops.mulMat(w, x), 1)))
          const graph = g.build()
          const backend = yield* d.makeBackend()
          assert.strictEqual(backend.optimize(graph).nodes.some((n) => n.op._tag === "MulMatStack"), fast, dtype)
          const fused = Fusion.optimize(graph, { mulMatStack: () => true })
          const results: Array<Array<number>> = []
          for (const [dev, h] of [[d, fused], [Cpu.make(), graph]] as const) {
            const b = yield* dev.makeBackend()
            const plan = yield* b.allocate(h)
            for (const [i, w] of ws.entries()) {
              const v = Generators.values(3 + i, K * w.ne[1])
              yield* plan.set(w, dtype === "f16" || dtype === "f32" ? v : Quant.unsafeQuantize(dtype, v))
            }
            yield* plan.set(x, Generators.values(9, K))
            const trace = yield* b.captureNext
            yield* b.compute(plan)
            if (dev === d) {
              const entries = (yield* trace).entries
              assert.include(entries.map((e) => e.variant?.family), family, `${dtype} K ${K}`)
              const stack = entries.find((e) => e.variant?.family === "mvq8_stack")
              if (stack) assert.strictEqual(stack.variant?.uniform, rows === whole ? true : undefined, stack.kernel)
            }
            const out: Array<number> = []
            for (const y of ys) out.push(...(yield* plan.get(y)))
            results.push(out)
          }
          assert.isBelow(nmse(results[0], results[1]), family === "mvq8_stack" ? 1e-9 : 5e-5, `${dtype} K ${K} ${rows}`)
        }
      }),
    120_000
  )

  // a one-row residual sum kept beside its norm (add_rms_norm_keep): rows short enough to stay in registers
  // and longer ones, the sum read back through its view as well as the norm; with the adapter's threads and
  // with 1024 a workgroup (as a GPU's decoding step runs its 4096-wide norms: 4 values a thread)
  it.scoped(
    "a residual sum kept beside its norm (add_rms_norm_keep) matches the CPU's unfused graph",
    () =>
      Effect.gen(function*() {
        for (
          const [threads, D] of [[undefined, 96], [undefined, 5000], [1024, 96], [1024, 4096], [1024, 5000]] as const
        ) {
          const [d] = yield* WebGpu.make({ devices: 1, ...(threads ? { rowThreads: threads } : {}) })
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [D])
          const r = yield* g.input("r", "f32", [D])
          const w = yield* g.param("w", "f32", [D])
          const s = yield* Ops.add(x, r)
          const h = yield* Ops.mul(Ops.rmsNorm(s, 1e-5), w)
          const y = yield* g.output(Ops.add(s, Ops.scale(h, 0.5)))
          const graph = g.build()
          const backend = yield* d.makeBackend()
          const fused = backend.optimize(graph)
          assert.include(fused.nodes.map((n) => n.op._tag), "AddRmsNormKeep")
          const results: Array<Array<number>> = []
          for (const [dev, f] of [[d, fused], [Cpu.make(), graph]] as const) {
            const b = yield* dev.makeBackend()
            const plan = yield* b.allocate(f)
            yield* plan.set(x, Generators.values(1, D))
            yield* plan.set(r, Generators.values(2, D))
            yield* plan.set(w, Generators.values(3, D))
            const trace = yield* b.captureNext
            yield* b.compute(plan)
            if (dev === d) {
              const norm = (yield* trace).entries.find((e) => e.op === "add_rms_norm_keep")
              assert.isDefined(norm)
              if (threads !== undefined) assert.strictEqual(norm!.variant?.threads, threads)
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-10, `${D} ${threads}`)
        }
      }),
    120_000
  )

  // the GPU form of the row kernels and of attention's decode form (short loops written out), forced on any
  // adapter: a sum broadcast over rows and a weight over them (indexed without a modulo where the extents
  // match or are 1), rows that fill the threads and rows that do not
  it.scoped(
    "row kernels and attention's decode form written out (the GPU form) match the CPU",
    () =>
      Effect.gen(function*() {
        for (const [D, across] of [[66, "keys"], [302, "keys"], [66, "dims"]] as const) {
          const [d] = yield* WebGpu.make({ devices: 1, writeOut: true, attentionDecode: { splits: 3, across } })
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [D, 6])
          const r = yield* g.input("r", "f32", [D, 3])
          const w = yield* g.param("w", "f32", [D])
          const m = yield* g.input("m", "f32", [D, 6])
          const normed = yield* g.output(Ops.mul(Ops.rmsNorm(Ops.add(x, r), 1e-5), w))
          const probs = yield* g.output(Ops.softMax(x, { mask: m, scale: 0.5 }))
          const q = yield* g.input("q", "f32", [64, 1, 4])
          const k = yield* g.input("k", "f16", [64, D, 2])
          const v = yield* g.input("v", "f16", [64, D, 2])
          const km = yield* g.input("km", "f16", [D, 1])
          const att = yield* g.output(Ops.flashAttnExt(q, k, v, { scale: 0.125, mask: km }))
          const graph = g.build()
          const results: Array<Array<Array<number>>> = []
          for (const dev of [d, Cpu.make()]) {
            const backend = yield* dev.makeBackend()
            const plan = yield* backend.allocate(backend.optimize(graph))
            for (const [i, t] of [x, r, w, m, q, k, v, km].entries()) {
              yield* plan.set(t, Generators.values(40 + i, t.ne.reduce((a, n) => a * n, 1)))
            }
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            if (dev === d) {
              const entries = (yield* trace).entries
              const norm = entries.find((e) => e.op === "add_rms_norm")
              assert.deepInclude(norm?.variant, { unrolled: true, bForm: "=%==", wForm: "=1==" }, norm?.kernel)
              // rows a subgroup holds (the next test) take the subgroup form, longer ones the row kernel
              const soft = entries.find((e) => e.op === "soft_max")?.variant
              if (!String(soft?.form).startsWith("sg")) assert.strictEqual(soft?.unrolled, true)
              const decode = entries.find((e) => e.variant?.family === "flash_attn_decode")
              // the decode form needs subgroups
              if (d.description.includes("subgroups")) assert.deepInclude(decode?.variant, { out: true, across })
            }
            results.push(
              yield* Effect.forEach([normed, probs, att], (t) =>
                Effect.map(plan.get(t), (a) => Array.from(a as Float32Array)))
            )
          }
          for (let i = 0; i < 3; i++) {
            assert.isBelow(nmse(results[0][i], results[1][i]), 1e-6, `${D} output ${i}`)
          }
        }
      }),
    120_000
  )

  // soft_max a row per subgroup (the GPU form, forced): rows that fill the lanes and rows that do not, an
  // f16 mask broadcast over heads with rows past the scores', ALiBi slopes, sinks, a row offset by a view;
  // rows longer than 32 a lane take the workgroup-per-row kernel
  it.scoped("soft_max a row per subgroup matches the CPU", () =>
    Effect.gen(function*() {
      const [d] = yield* WebGpu.make({ devices: 1, writeOut: true })
      const info = Option.getOrUndefined(WebGpuDevice.gpuDevice(d))?.adapterInfo
      const fixed = info?.subgroupMinSize === info?.subgroupMaxSize ? info?.subgroupMinSize : undefined
      // without subgroups of one size every row takes the row kernel (S = 0: no row fits a subgroup)
      const S = d.description.includes("subgroups") ? fixed ?? 0 : 0
      for (const n of S > 0 ? [4 * S, 3 * S + 5, 32 * S + 1] : [100]) {
        for (const variant of ["mask", "sinks"] as const) {
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [n * 15 + 3])
          const scores = Ops.view(x, [n, 5, 3], [4 * n, 20 * n], 12)
          const m = yield* g.input("m", "f16", [n, 7])
          const sinks = yield* g.input("s", "f32", [3])
          const y = yield* g.output(
            Ops.softMax(scores, variant === "mask" ? { mask: m, scale: 0.7, maxBias: 8 } : { sinks, scale: 0.3 })
          )
          const results: Array<Array<number>> = []
          for (const dev of [d, Cpu.make()]) {
            const backend = yield* dev.makeBackend()
            const plan = yield* backend.allocate(g.build())
            yield* plan.set(x, Generators.values(71, n * 15 + 3))
            if (variant === "mask") yield* plan.set(m, Generators.values(72, n * 7))
            else yield* plan.set(sinks, Generators.values(73, 3))
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            if (dev === d) {
              const form = String((yield* trace).entries.find((e) => e.op === "soft_max")?.variant?.form)
              const R = S > 0 ? Math.ceil(n / S) : Infinity
              if (R > 32) assert.notMatch(form, /^sg/, `${n} ${variant}`)
              else assert.strictEqual(form, `sg${R}${n % S === 0 ? "f" : ""}`, `${n} ${variant}`)
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-10, `${n} ${variant}`)
        }
      }
    }), 120_000)

  // rope stored by set_rows in one dispatch (rope_set_rows), normal and neox, with frequency factors once:
  // the cache after it against the CPU's unfused graph
  it.scoped(
    "keys rotated as they are stored (rope_set_rows) match the CPU's rope then set_rows",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        for (const [mode, factors] of [[0, false], [2, true]] as const) {
          const g = Graph.make()
          const cache = yield* g.param("cache", "f16", [128, 9])
          const k = yield* g.input("k", "f32", [64, 2, 3])
          const pos = yield* g.input("pos", "i32", [3])
          const rows = yield* g.input("rows", "i32", [3])
          const f = factors ? yield* g.param("f", "f32", [16]) : undefined
          const r = Ops.rope(k, pos, { nDims: 32, mode, freqBase: 10000, ...(f ? { freqFactors: f } : {}) })
          const y = yield* g.output(Ops.scale(Ops.setRows(cache, Ops.reshape(r, [128, 3]), rows), 1))
          const graph = g.build()
          const backend = yield* d.makeBackend()
          const fused = backend.optimize(graph)
          assert.include(fused.nodes.map((n) => n.op._tag), "RopeSetRows")
          const results: Array<Array<number>> = []
          for (const [dev, h] of [[d, fused], [Cpu.make(), graph]] as const) {
            const b = yield* dev.makeBackend()
            const plan = yield* b.allocate(h)
            yield* plan.set(cache, Generators.values(1, 128 * 9))
            yield* plan.set(k, Generators.values(2, 64 * 2 * 3))
            yield* plan.set(pos, Int32Array.from([3, 100, 7]))
            yield* plan.set(rows, Int32Array.from([8, 2, 5]))
            if (f) yield* plan.set(f, Generators.values(3, 16).map((x) => 1 + Math.abs(x)))
            const trace = yield* b.captureNext
            yield* b.compute(plan)
            if (dev === d) assert.include((yield* trace).entries.map((e) => e.op), "rope_set_rows")
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-7, `mode ${mode}`)
        }
      }),
    120_000
  )

  // flash attention's forms, each forced once against the CPU: the decode form (few query rows, where the
  // device has subgroups) with K and V read four values per load, the scores' lanes across the keys (the
  // default there) or across the head dimension, and the keys split over workgroups (then merged by a second
  // dispatch: fewer splits than the merge reads at a time, and more with a remainder), its scalar form (a
  // head size not a multiple of 4) in one split, the mask shared by the heads or one a head, the
  // subgroup-matrix form for more rows (a tail of rows past its 64, where the device has the matrices), and
  // the row form everywhere else
  const decodeFamilies = ["flash_attn_decode", "flash_attn_merge"] as const
  const attentionForms = [
    { nQ: 1, D: 64, splits: 3, sinks: true, families: decodeFamilies, wide: true, maskHeads: 1, across: "keys" },
    { nQ: 2, D: 64, splits: 11, sinks: false, families: decodeFamilies, wide: true, maskHeads: 4, across: "keys" },
    // a workgroup a query head (each KV head's two read by two workgroups)
    {
      nQ: 1,
      D: 64,
      splits: 4,
      sinks: false,
      families: decodeFamilies,
      wide: true,
      maskHeads: 1,
      across: "keys",
      heads: 1
    },
    {
      nQ: 2,
      D: 64,
      splits: 5,
      sinks: true,
      families: decodeFamilies,
      wide: true,
      maskHeads: 4,
      across: "dims",
      heads: 1
    },
    // more splits than the merge's 64 threads (70 of 300 keys: 5 keys a split)
    { nQ: 2, D: 64, splits: 70, sinks: true, families: decodeFamilies, wide: true, maskHeads: 4, across: "dims" },
    {
      nQ: 3,
      D: 62,
      splits: 1,
      sinks: false,
      families: ["flash_attn_decode"],
      wide: false,
      maskHeads: 1,
      across: "dims"
    },
    {
      nQ: 9,
      D: 64,
      splits: 1,
      sinks: true,
      families: ["flash_attn_mma"],
      wide: undefined,
      maskHeads: 1,
      across: undefined
    },
    {
      nQ: 70,
      D: 48,
      splits: 1,
      sinks: false,
      families: ["flash_attn_mma"],
      wide: undefined,
      maskHeads: 1,
      across: undefined
    },
    {
      nQ: 9,
      D: 62,
      splits: 1,
      sinks: false,
      families: ["flash_attn"],
      wide: undefined,
      maskHeads: 1,
      across: undefined
    }
  ] as const
  for (const form of attentionForms) {
    it.scoped(
      `flash attention: ${form.families.join(" + ")} (${form.nQ} rows, D ${form.D}, ${form.splits} splits, mask ` +
        `over ${form.maskHeads} heads${form.across ? `, lanes across ${form.across}` : ""}${
          "heads" in form ? `, ${form.heads} head a workgroup` : ""
        }) matches the CPU`,
      () =>
        Effect.gen(function*() {
          const forced = {
            splits: form.splits,
            ...(form.across !== undefined ? { across: form.across } : {}),
            ...("heads" in form ? { heads: form.heads } : {})
          }
          const [d] = yield* WebGpu.make({ devices: 1, attentionDecode: forced })
          // without subgroups the decode form is not offered: the row form runs
          const offered = form.families[0] === "flash_attn_mma"
            ? WebGpuDevice.hasSubgroupMatrices(d)
            : d.description.includes("subgroups")
          const families = offered ? [...form.families] : ["flash_attn"]
          const { D, nQ } = form
          const nKv = 300
          const g = Graph.make()
          const q = yield* g.input("q", "f32", [D, nQ, 4])
          const k = yield* g.input("k", "f16", [D, nKv, 2])
          const v = yield* g.input("v", "f16", [D, nKv, 2])
          const mask = yield* g.input("mask", "f16", [nKv, nQ + 2, form.maskHeads])
          const sinks = form.sinks ? yield* g.input("sinks", "f32", [4]) : undefined
          const y = yield* g.output(Ops.flashAttnExt(q, k, v, { scale: 1 / Math.sqrt(D), mask, sinks }))
          const inputs = [q, k, v, mask, ...(sinks ? [sinks] : [])]
          const results: Array<Array<number>> = []
          for (const dev of [d, Cpu.make()]) {
            const backend = yield* dev.makeBackend()
            const plan = yield* backend.allocate(g.build())
            for (const [i, t] of inputs.entries()) {
              const values = Generators.values(20 + i, t.ne.reduce((x, n) => x * n, 1))
              // the mask hides every fifth key
              yield* plan.set(t, t === mask ? values.map((x, j) => j % 5 === 0 ? -Infinity : x) : values)
            }
            const trace = yield* backend.captureNext
            yield* backend.compute(plan)
            if (dev === d) {
              const entries = (yield* trace).entries
              assert.deepStrictEqual(entries.map((e) => e.variant?.family), families)
              if (families[0] === "flash_attn_decode") {
                assert.strictEqual(entries[0].variant?.wide, form.wide, entries[0].kernel)
                assert.strictEqual(entries[0].variant?.across, form.across, entries[0].kernel)
                assert.strictEqual(entries[0].variant?.mask, form.maskHeads === 1 ? "shared" : "per-head")
                assert.strictEqual(entries[0].variant?.heads, "heads" in form ? form.heads : 2, entries[0].kernel)
              }
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          // the matrix form rounds Q and P to f16, as ggml's GPU kernels do
          assert.isBelow(nmse(results[0], results[1]), families[0] === "flash_attn_mma" ? 1e-5 : 1e-6)
        }),
      60_000
    )
  }

  // q rotated as attention reads it (rope_flash_attn_ext), in each form that takes it: the decode form with
  // the scores' lanes across the keys and across the head dimension (the device fuses where these run), and
  // the row form (more query rows than the decode form takes; fused here by asking Fusion directly); modes
  // 0 and 2, all of a row rotated or its first 48 values, frequency factors and YaRN once; q a view of a
  // wider row (as a stacked q, k and v give it), grouped KV heads, a mask
  const ropeForms = [
    { across: "keys", nQ: 1, mode: 0, nDims: 64, factors: false, yarn: false, family: "flash_attn_decode" },
    { across: "dims", nQ: 2, mode: 2, nDims: 48, factors: true, yarn: true, family: "flash_attn_decode" },
    { across: undefined, nQ: 9, mode: 2, nDims: 64, factors: false, yarn: false, family: "flash_attn" }
  ] as const
  for (const form of ropeForms) {
    it.scoped(
      `q rotated by its attention (${form.family}${form.across ? `, lanes across ${form.across}` : ""}, mode ` +
        `${form.mode}, ${form.nQ} rows) matches the CPU's rope, permute and flash_attn_ext`,
      () =>
        Effect.gen(function*() {
          const [d] = yield* WebGpu.make({
            devices: 1,
            attentionDecode: { splits: 3, ...(form.across ? { across: form.across } : {}) }
          })
          const subgroups = d.description.includes("subgroups")
          const { nQ } = form
          const D = 64
          const nKv = 200
          const g = Graph.make()
          const qkv = yield* g.input("qkv", "f32", [D * 4 + 32, nQ])
          const k = yield* g.input("k", "f16", [D, nKv, 2])
          const v = yield* g.input("v", "f16", [D, nKv, 2])
          const pos = yield* g.input("pos", "i32", [nQ])
          const mask = yield* g.input("mask", "f16", [nKv, nQ])
          const f = form.factors ? yield* g.param("f", "f32", [form.nDims / 2]) : undefined
          const q = Ops.view(qkv, [D, 4, nQ], [D * 4, qkv.nb[1]], 0)
          const r = Ops.rope(q, pos, {
            nDims: form.nDims,
            mode: form.mode,
            freqBase: 10000,
            ...(f ? { freqFactors: f } : {}),
            ...(form.yarn ? { extFactor: 1, freqScale: 0.25, nCtxOrig: 512, attnFactor: 1 } : {})
          })
          const y = yield* g.output(Ops.flashAttnExt(Ops.permute(r, [0, 2, 1, 3]), k, v, { scale: 0.125, mask }))
          const graph = g.build()
          const backend = yield* d.makeBackend()
          const fused = form.family === "flash_attn"
            ? Fusion.optimize(graph, { ropeAttention: () => true })
            : backend.optimize(graph)
          const results: Array<Array<number>> = []
          for (const [dev, h] of [[d, fused], [Cpu.make(), graph]] as const) {
            const b = yield* dev.makeBackend()
            const plan = yield* b.allocate(h)
            yield* plan.set(qkv, Generators.values(1, (D * 4 + 32) * nQ))
            yield* plan.set(k, Generators.values(2, D * nKv * 2))
            yield* plan.set(v, Generators.values(3, D * nKv * 2))
            yield* plan.set(pos, Int32Array.from({ length: nQ }, (_, i) => 37 * i + 5))
            yield* plan.set(mask, Generators.values(4, nKv * nQ).map((x, j) => (j % 7 === 0 ? -Infinity : x)))
            if (f) yield* plan.set(f, Generators.values(5, form.nDims / 2).map((x) => 1 + Math.abs(x)))
            const trace = yield* b.captureNext
            yield* b.compute(plan)
            if (dev === d) {
              const entries = (yield* trace).entries
              // without subgroups the decode form is not offered and the device does not fuse
              const want = subgroups || form.family === "flash_attn" ? "rope_flash_attn_ext" : "flash_attn_ext"
              assert.include(entries.map((e) => e.op), want)
              const own = entries.find((e) => e.op === want)!
              if (want === "rope_flash_attn_ext") {
                assert.strictEqual(own.variant?.family, subgroups ? form.family : "flash_attn", own.kernel)
                assert.strictEqual(own.variant?.rope, form.mode, own.kernel)
                if (subgroups && form.across) assert.strictEqual(own.variant?.across, form.across, own.kernel)
              }
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 1e-6)
        }),
      60_000
    )
  }

  it.scoped(
    "f16 mul_mat on subgroup matrices loads 16 bytes where K and the offsets allow, else 8, else 2",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        if (!d.description.includes("shader-f16")) return
        // [K, b viewed this many elements in, f16 per load on subgroup matrices]: an offset of 4 binds wide
        // operands at the wrong alignment, so the 8-byte form runs
        const table: ReadonlyArray<readonly [number, number, number]> = [
          [136, 0, 8],
          [136, 8, 8],
          [136, 4, 4],
          [132, 0, 4],
          [130, 0, 1]
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
              assert.strictEqual(entry.variant?.load, form, `K ${K}, offset ${offset}: ${entry.kernel}`)
            }
            results.push(Array.from(yield* plan.get(y)))
          }
          assert.isBelow(nmse(results[0], results[1]), 5e-4, `K ${K}, offset ${offset}`)
        }
      }),
    60_000
  )
})
