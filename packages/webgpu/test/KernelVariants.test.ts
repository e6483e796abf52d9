/**
 * Which kernel variant runs, on the adapter at hand, and that each matches the CPU: matrix-vector loads,
 * register and subgroup-matrix tilings, row kernels (vec4 rows on software adapters, the GPU form, soft_max
 * a row per subgroup, a residual sum kept beside its norm), glu, copies and unary ops on views four values a
 * thread, and what the device supports. The decode products' forms are in DecodeVariants.test.ts,
 * attention's in AttentionVariants.test.ts.
 */
import { Cpu, Float16, Graph, Ops, Registry } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { adapterAvailable, nmse, onDeviceAndCpu, productOnBoth } from "./utils.js"

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
          const graph = g.build()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(a, Generators.values(5, 19 * K))
              yield* plan.set(b, Generators.values(6, 2 * K + 1))
            }), [y])
          const [entry] = entries.filter((e) => e.op === "mul_mat")
          const v = entry.variant
          const form = v === undefined ? "" : v.vec4 ? "vec4" : `scalar ${v.threadsPerRow}`
          assert.strictEqual(form, kernel, `K ${K}: ${entry.kernel}`)
          assert.isBelow(nmse(gpu, cpu), 1e-6, `K ${K}`)
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
        for (const [K, M, N, shifted, bias, want, rows] of table) {
          const spec = { dtype: "f16", K, M, N, batches: [1, 2], shifted, bias, seed: 5 } as const
          const { cpu, entries: [entry], gpu } = yield* productOnBoth(d, spec)
          assert.strictEqual(entry.variant?.family, subgroups ? want : "mv", `K ${K}: ${entry.kernel}`)
          if (subgroups && want === "mvh") assert.strictEqual(entry.variant?.rows, rows, entry.kernel)
          assert.isBelow(nmse(gpu, cpu), 1e-6, `K ${K}`)
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
        for (const [M, N, onGpu, onCpu] of table) {
          const g = Graph.make()
          const a = yield* g.param("a", "f32", [64, M])
          const b = yield* g.input("b", "f32", [64, N])
          const y = yield* g.output(Ops.mulMat(a, b))
          const graph = g.build()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(a, Generators.values(7, 64 * M))
              yield* plan.set(b, Generators.values(8, 64 * N))
            }), [y])
          const v = entries[0].variant
          const kernel = v === undefined ? "" : `${v.family} ${v.m}x${v.n}:${v.depth}`
          assert.strictEqual(kernel, software ? onCpu : onGpu, `${M}x${N}`)
          assert.isBelow(nmse(gpu, cpu), 1e-6, `${M}x${N}`)
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
          const graph = g.build()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(x, Generators.values(11, n * 3 + 4))
              if (masked) yield* plan.set(m, Generators.values(12, n * 3))
            }), [y])
          const [entry] = entries.filter((e) => e.op === "soft_max")
          const vec4 = String(entry.variant?.form).startsWith("v4")
          assert.strictEqual(vec4, software && vec, `${n} ${offset}: ${entry.kernel}`)
          assert.isBelow(nmse(gpu, cpu), 1e-10, `${n} ${offset} ${masked}`)
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
    // neighbouring workgroups taking one row block's column blocks (register tiles) or one column block's
    // row blocks (subgroup matrices): the orders not taken by default
    { registerTile: { m: 8, n: 8, depth: 8, order: "columns" }, matrixOrder: "rows" },
    { registerTile: { m: 4, n: 8, depth: 16, order: "columns" } },
    // an adapter's subgroup matrices left unused (as a browser's adapter without them): f16 on register tiles
    { subgroupMatrices: false, registerOrder: "columns" },
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
            const graph = g.build()
            const { cpu, entries: [entry], gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
              Effect.gen(function*() {
                yield* plan.set(a, Generators.values(1, K * M * 2))
                yield* plan.set(b, Generators.values(2, K * N * 4))
              }), [y])
            const v = entry.variant
            if (dtype === "f32") {
              assert.deepInclude(v, { family: "mm4", whole: loads === "whole" }, entry.kernel)
              assert.strictEqual(v?.order, options.registerTile?.order ?? options.registerOrder, entry.kernel)
            }
            if (dtype === "f16") {
              assert.strictEqual(v?.family === "mmsg", WebGpuDevice.hasSubgroupMatrices(d), entry.kernel)
              if (options.subgroupMatrices === false) {
                assert.isFalse(WebGpuDevice.hasSubgroupMatrices(d))
              }
              if (WebGpuDevice.hasSubgroupMatrices(d)) {
                assert.strictEqual(v?.whole, loads === "whole", entry.kernel)
                assert.strictEqual(v?.order, options.matrixOrder === "rows" ? "rows" : undefined, entry.kernel)
              }
            }
            assert.isBelow(nmse(gpu, cpu), 5e-4, `${dtype} ${K}x${M}x${N}`)
          }
        }
      }), 60_000)
  }

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
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, fused, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(x, Generators.values(1, D))
              yield* plan.set(r, Generators.values(2, D))
              yield* plan.set(w, Generators.values(3, D))
            }), [y])
          const norm = entries.find((e) => e.op === "add_rms_norm_keep")
          assert.isDefined(norm)
          if (threads !== undefined) assert.strictEqual(norm!.variant?.threads, threads)
          assert.isBelow(nmse(gpu, cpu), 1e-10, `${D} ${threads}`)
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
  // f16 mask broadcast over heads with rows past the scores' and each row's tail -inf as a causal mask's,
  // ALiBi slopes, sinks, a row offset by a view; rows longer than 32 a lane take the workgroup-per-row kernel
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
          const graph = g.build()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(x, Generators.values(71, n * 15 + 3))
              if (variant === "mask") {
                // mask row k: -inf past its first 3 k + 2 keys
                yield* plan.set(
                  m,
                  Generators.values(72, n * 7).map((v, j) => (j % n > 3 * Math.floor(j / n) + 2 ? -Infinity : v))
                )
              } else yield* plan.set(sinks, Generators.values(73, 3))
            }), [y])
          const form = String(entries.find((e) => e.op === "soft_max")?.variant?.form)
          const R = S > 0 ? Math.ceil(n / S) : Infinity
          if (R > 32) assert.notMatch(form, /^sg/, `${n} ${variant}`)
          else assert.strictEqual(form, `sg${R}${n % S === 0 ? "f" : ""}`, `${n} ${variant}`)
          assert.isBelow(nmse(gpu, cpu), 1e-10, `${n} ${variant}`)
        }
      }
    }), 120_000)

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
          const graph = g.build()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(a, Generators.values(7, K * 48))
              yield* plan.set(b, Generators.values(8, K * 40 + 8))
            }), [y])
          const [entry] = entries.filter((e) => e.op === "mul_mat")
          if (WebGpuDevice.hasSubgroupMatrices(d)) {
            assert.strictEqual(entry.variant?.load, form, `K ${K}, offset ${offset}: ${entry.kernel}`)
          }
          assert.isBelow(nmse(gpu, cpu), 5e-4, `K ${K}, offset ${offset}`)
        }
      }),
    60_000
  )

  // glu, copies and unary ops on views four values a thread where every operand's rows are runs of fours (a
  // prompt's halves of its stacked gate and up product, a permute that keeps dimension 0), the element form
  // where a row's length or an offset is not
  it.layer(WebGpu.layer({ devices: 1 }), { timeout: "60 seconds" })("rows of fours", (it) => {
    it.scoped("glu runs four values a thread where rows are runs of fours, one otherwise; all match the CPU", () =>
      Effect.gen(function*() {
        const d = yield* Registry.deviceByName("WebGPU0")
        // [dtype, the result's row length, a gate operand, swapped, a's rows this many elements into a
        // wider tensor (0: a tensor of its own), a's first element this far in, the form]
        const table: ReadonlyArray<readonly [string, number, boolean, boolean, number, number, number]> = [
          ["f32", 12, false, false, 0, 0, 4],
          ["f16", 12, false, true, 0, 0, 4],
          ["f32", 12, true, true, 0, 0, 4],
          ["f16", 16, true, false, 40, 0, 4],
          ["f32", 16, false, false, 40, 8, 4],
          ["f32", 16, false, false, 40, 1, 1],
          ["f32", 10, false, false, 0, 0, 1]
        ]
        for (const [dtype, n, gated, swapped, wide, shift, width] of table) {
          const g = Graph.make()
          const cols = gated ? n : 2 * n
          const rows = 5
          const stride = wide === 0 ? cols : wide
          const size = stride * rows * 2 + shift
          const x = yield* g.input("x", dtype as "f32" | "f16", [size])
          const elt = dtype === "f16" ? 2 : 4
          const a = Ops.view(x, [cols, rows, 2], [elt * stride, elt * stride * rows], elt * shift)
          const gate = gated ? yield* g.input("gate", dtype as "f32" | "f16", [n, rows, 2]) : undefined
          const y = yield* g.output(Ops.glu(a, swapped ? "geglu" : "swiglu", { gate, swapped }))
          const graph = g.build()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(x, Generators.values(3, size))
              if (gate !== undefined) yield* plan.set(gate, Generators.values(4, n * rows * 2))
            }), [y])
          const [entry] = entries.filter((e) => e.op === "glu")
          const label = `${dtype} ${n} gated ${gated} in ${wide} from ${shift}: ${entry.kernel}`
          assert.strictEqual(entry.variant?.width ?? 1, width, label)
          assert.isBelow(nmse(gpu, cpu), dtype === "f16" ? 1e-5 : 1e-10, label)
        }
      }))

    it.scoped("copies and unary ops of views run four values a thread where rows are runs of fours; all match the CPU", () =>
      Effect.gen(function*() {
        const d = yield* Registry.deviceByName("WebGPU0")
        // [the source's shape, the permute, the result's type, scale (else cont), the form]
        const table: ReadonlyArray<readonly [ReadonlyArray<number>, ReadonlyArray<number>, string, boolean, number]> = [
          [[8, 6, 5, 1], [0, 2, 1, 3], "f32", false, 4],
          [[8, 6, 5, 1], [0, 2, 1, 3], "f16", false, 4],
          [[12, 3, 2, 2], [0, 3, 2, 1], "f32", true, 4],
          [[8, 6, 5, 1], [1, 0, 2, 3], "f32", false, 1],
          [[6, 6, 5, 1], [0, 2, 1, 3], "f32", false, 1]
        ]
        for (const [ne, axes, dtype, scaled, width] of table) {
          const g = Graph.make()
          const size = ne.reduce((p, x) => p * x, 1)
          const x = yield* g.input("x", "f32", [...ne])
          const p = Ops.permute(x, axes as [number, number, number, number])
          const y = yield* g.output(
            scaled ? Ops.scale(p, 0.5) : dtype === "f16" ? Ops.cpy(p, "f16") : Ops.cont(p)
          )
          const graph = g.build()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(
            d,
            graph,
            graph,
            (plan) => plan.set(x, Generators.values(5, size)),
            [y]
          )
          const entry = entries.find((e) => e.op === "cont" || e.op === "scale" || e.op === "cpy")!
          const label = `${ne} by ${axes} to ${dtype}: ${entry.kernel}`
          assert.strictEqual(entry.variant?.width ?? 1, width, label)
          assert.isBelow(nmse(gpu, cpu), dtype === "f16" ? 1e-5 : 1e-12, label)
        }
      }))
  })
})
