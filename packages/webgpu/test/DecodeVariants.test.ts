/**
 * The matrix-vector kernels models decode with, on the adapter at hand, each form forced once and matched
 * against the CPU: quantized blocks read in place (the GPU shapes, a's rows staged), the int8 form of every
 * block type, a gated FFN's products with their swiglu, and products stacked over shared activations.
 */
import { DType, Tensor } from "@effect-gpu/core"
import { Fusion, Graph, Ops, Quant } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { adapterAvailable, int8Device, nmse, offersInt8, onDeviceAndCpu } from "./utils.js"

/** a stack's q, k and v weights of `rows` rows over K, of `types` ("q4_K", or one a part: "q4_K+q4_K+q6_K") */
const qkvWeights = (g: Graph.Builder, types: string, K: number, rows: ReadonlyArray<number>) => {
  const parts = types.split("+") as Array<DType.DType>
  return Effect.forEach(["wq", "wk", "wv"], (name, i) => g.param(name, parts[i] ?? parts[0], [K, rows[i]]))
}

/** seeded values for weights `w`: as they are for f32 and f16, else quantized to its blocks */
const weightsFor = (w: Tensor.Tensor, seed: number) => {
  const v = Generators.values(seed, Tensor.nelements(w))
  return DType.isQuantized(w.dtype) ? Quant.unsafeQuantize(w.dtype, v) : v
}

describe.skipIf(!adapterAvailable)("WebGPU decode kernel variants", () => {
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
            const graph = g.build()
            const { cpu, entries: [entry], gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
              Effect.gen(function*() {
                yield* plan.set(a, Quant.unsafeQuantize(dtype, Generators.values(3, K * 37 * 2)))
                yield* plan.set(b, Generators.values(4, K * 2 * 4))
              }), [y])
            assert.deepInclude(entry.variant, { family: form.family, rows: form.decode.rows, columns: 2 }, entry.kernel)
            // the CPU rounds activations to q8_0 / q8_K blocks as ggml's CPU does; these kernels keep them f32
            assert.isBelow(nmse(gpu, cpu), 5e-5, dtype)
          }
        }),
      120_000
    )
  }

  // the int8 form of every block type's decode: b rounded to q8_0 (q8_K for the k-quants) in
  // workgroup memory as the CPU rounds it, so the two agree to f32 summation order; odd rows (a subgroup's
  // second row past the end), batches broadcast, a bias, and a's rows viewed one row in (bytes off 16)
  // falling back to the f32 form (q4_K's rows stay at 16 bytes); q6_K's blocks of 210 bytes, every other one
  // 2 bytes into a word, and rows that are not whole words (the f32 form); with a row a subgroup (int8Rows)
  it.scoped(
    "quantized matrix-vector products in the int8 form (mvq8) match the CPU, or fall back",
    () =>
      Effect.gen(function*() {
        const [plain] = yield* WebGpu.make({ devices: 1 })
        if (!offersInt8(plain)) return
        const single = yield* int8Device({ int8Rows: 1 })
        // [K, a viewed one row in, b's batches K + 1 apart (read a value at a time), the kernel]
        const blocks32 = [
          [2560, false, false, "mvq8"],
          [2624, true, false, "mvq"],
          [640, false, true, "mvq8"],
          [4160, false, false, "mvq8"]
        ] as const
        const cases = {
          q4_0: blocks32,
          q4_1: blocks32,
          q5_0: blocks32,
          q8_0: blocks32,
          q4_K: [[2560, false, false, "mvq8"], [512, true, false, "mvq8"], [768, false, true, "mvq8"]],
          q6_K: [[2560, false, false, "mvq8"], [512, true, false, "mvq"], [768, false, true, "mvq"], [
            1024,
            false,
            true,
            "mvq8"
          ]]
        } as const
        const runs = [
          [plain, "q4_0"],
          [plain, "q4_1"],
          [plain, "q5_0"],
          [plain, "q8_0"],
          [plain, "q4_K"],
          [plain, "q6_K"],
          [single, "q8_0"],
          [single, "q4_K"]
        ] as const
        for (const [d, dtype] of runs) {
          for (const [K, viewed, strided, family] of cases[dtype]) {
            const g = Graph.make()
            const a = yield* g.param("a", dtype, [K, 38, 2])
            const a1 = Ops.view(a, [K, 37, 2], [a.nb[1], a.nb[2]], viewed ? a.nb[1] : 0)
            const bs = yield* g.input("b", "f32", [(K + 1) * 4])
            const b = Ops.view(bs, [K, 1, 4], [4 * K, 4 * (strided ? K + 1 : K)], 0)
            const c = yield* g.param("c", "f32", [37, 1, 4])
            const y = yield* g.output(Ops.add(Ops.mulMat(a1, b), c))
            const graph = g.build()
            const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, graph, graph, (plan) =>
              Effect.gen(function*() {
                yield* plan.set(a, Quant.unsafeQuantize(dtype, Generators.values(3, K * 38 * 2)))
                yield* plan.set(bs, Generators.values(4, (K + 1) * 4))
                yield* plan.set(c, Generators.values(5, 37 * 4))
              }), [y])
            assert.deepInclude(entries[0].variant, { family, dtype }, `${dtype} K ${K}`)
            if (family === "mvq8") assert.strictEqual(entries[0].variant?.fours, !strided)
            if (family === "mvq8") assert.strictEqual(entries[0].variant?.int8Rows, d === single ? 1 : undefined)
            if (family === "mvq8") assert.strictEqual(entries[0].variant?.K, K)
            assert.isBelow(nmse(gpu, cpu), family === "mvq8" ? 1e-9 : 5e-5, `${dtype} K ${K}`)
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
          ["q4_1", 640, int8 ? "mvq8_swiglu" : rowsForm],
          ["q4_K", 512, int8 ? "mvq8_swiglu" : rowsForm],
          ["q6_K", 1024, int8 ? "mvq8_swiglu" : rowsForm],
          ["q6_K", 768, rowsForm],
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
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, fused, graph, (plan) =>
            Effect.gen(function*() {
              for (const [t, seed] of [[gate, 3], [up, 4]] as const) {
                const v = Generators.values(seed, K * 37)
                yield* plan.set(t, dtype === "f32" || dtype === "f16" ? v : Quant.unsafeQuantize(dtype, v))
              }
              yield* plan.set(x, Generators.values(5, K * 3))
            }), [y])
          assert.strictEqual(entries.length, 1, dtype)
          assert.strictEqual(entries[0].variant?.family, family, `${dtype} K ${K}`)
          // the int8 form rounds b as the CPU does; the other forms keep b in f32
          assert.isBelow(nmse(gpu, cpu), family === "mvq8_swiglu" ? 1e-9 : 5e-5, `${dtype} K ${K}`)
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
          ["q6_K", 512, int8 ? "mvq8_stack" : rowsForm, straddling],
          ["q4_K", 768, int8 ? "mvq8_stack" : rowsForm, whole],
          ["q5_0", 640, int8 ? "mvq8_stack" : rowsForm, straddling],
          // parts of several types that round b alike (llama.cpp's Q4_K_M mixes q4_K and q6_K so)
          ["q4_K+q4_K+q6_K", 512, int8 ? "mvq8_stack" : rowsForm, whole],
          ["q4_K+q6_K+q4_K", 512, int8 ? "mvq8_stack" : rowsForm, straddling],
          ["q4_0+q8_0+q5_0", 640, int8 ? "mvq8_stack" : rowsForm, straddling],
          // k-quants with 32-value types round b two ways: not stacked
          ["q4_0+q4_0+q4_K", 512, rowsForm, whole],
          ["q6_K", 768, rowsForm, straddling],
          ["f16", 98, rowsForm, straddling],
          ["f16", 96, half === "mvh_stack" ? half : rowsForm, straddling],
          ["f16", 1024, half, straddling],
          ["f32", 1028, "mv_stack", straddling]
        ] as const
        // two workgroups taking the row groups in turn (int8Groups), each over its one rounding of b
        const inTurn = yield* int8Device({ int8Groups: 2 })
        const forced = int8
          ? [
            ["q8_0", 2560, "mvq8_stack", whole, inTurn],
            ["q8_0", 2560, "mvq8_stack", straddling, inTurn],
            ["q4_K+q4_K+q6_K", 512, "mvq8_stack", whole, inTurn]
          ] as const
          : []
        for (const [dtype, K, family, rows, on] of [...cases.map((c) => [...c, d] as const), ...forced]) {
          const fast = family !== rowsForm
          const g = Graph.make()
          const types = dtype.split("+")
          const ws = yield* qkvWeights(g, dtype, K, rows)
          const x = yield* g.input("x", "f32", [K, 1])
          const ys: Array<Tensor.Tensor> = []
          for (const w of ws) ys.push(yield* g.output(Ops.scale(Ops.mulMat(w, x), 1)))
          const graph = g.build()
          const backend = yield* d.makeBackend()
          assert.strictEqual(backend.optimize(graph).nodes.some((n) => n.op._tag === "MulMatStack"), fast, dtype)
          const fused = Fusion.optimize(graph, { mulMatStack: () => true })
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(on, fused, graph, (plan) =>
            Effect.gen(function*() {
              for (const [i, w] of ws.entries()) yield* plan.set(w, weightsFor(w, 3 + i))
              yield* plan.set(x, Generators.values(9, K))
            }), ys)
          assert.include(entries.map((e) => e.variant?.family), family, `${dtype} K ${K}`)
          const stack = entries.find((e) => e.variant?.family === "mvq8_stack")
          if (stack) assert.strictEqual(stack.variant?.uniform, rows === whole ? true : undefined, stack.kernel)
          if (stack) assert.strictEqual(stack.variant?.types, types.length > 1 ? types.join(",") : undefined)
          if (stack) assert.strictEqual(stack.variant?.inTurn, on === inTurn ? 2 : undefined, `${dtype} ${rows}`)
          assert.isBelow(nmse(gpu, cpu), family === "mvq8_stack" ? 1e-9 : 5e-5, `${dtype} K ${K} ${rows}`)
        }
      }),
    240_000
  )

  // a layer's q/k/v stack (the int8 form; f16 weights by subgroups) storing its keys, rotated, and its values
  // into their caches as it writes its rows, the store's own dispatch gone (parts of one type, or q4_K and
  // q6_K mixed): mode 0 over the whole head into an f16 cache, with frequency factors, YaRN and a partial
  // rotation into an f32 one, the table's last row; two dispatches where the device is asked to keep them
  // apart, and for a neox rope (pairs half a head apart, in other workgroups); K split over two workgroups
  // (int8Split), the split's merge storing; three workgroups taking the row groups in turn (int8Groups)
  it.scoped(
    "a q/k/v stack storing its keys and values (stores=kv) matches the CPU's products, rope and set_rows",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        const int8 = WebGpuDevice.hasInt8Dot(d)
        const half = d.description.includes("subgroups") && d.description.includes("shader-f16")
        if (!int8 || !half) console.log(`on ${d.description}: no int8 or no f16-by-subgroups stack to store from`)
        const [apart] = yield* WebGpu.make({ devices: 1, storeKeysInProducts: false })
        // K split in two (int8Splits.ts): the stores made by the split's merge
        const split = yield* int8Device({ int8Split: 256 })
        // three workgroups taking the stack's 32 row groups in turn, the stores made as each group's rows are
        const turns = yield* int8Device({ int8Groups: 3 })
        const all = [
          { dtype: "q4_0", mode: 0, nDims: 64, yarn: false, cache: "f16", slot: 5, device: d, fused: true },
          { dtype: "q4_K", mode: 0, nDims: 32, yarn: true, cache: "f32", slot: 2, device: d, fused: true },
          { dtype: "q8_0", mode: 0, nDims: 64, yarn: false, cache: "f16", slot: 8, device: d, fused: true },
          { dtype: "q4_K+q4_K+q6_K", mode: 0, nDims: 64, yarn: false, cache: "f16", slot: 3, device: d, fused: true },
          { dtype: "q4_0", mode: 0, nDims: 64, yarn: false, cache: "f16", slot: 5, device: apart, fused: false },
          { dtype: "q8_0", mode: 0, nDims: 64, yarn: false, cache: "f16", slot: 8, device: split, fused: true },
          { dtype: "q8_0", mode: 0, nDims: 64, yarn: false, cache: "f16", slot: 8, device: turns, fused: true },
          { dtype: "q4_K", mode: 0, nDims: 32, yarn: true, cache: "f32", slot: 2, device: turns, fused: true },
          { dtype: "q4_0", mode: 2, nDims: 64, yarn: false, cache: "f16", slot: 5, device: d, fused: false },
          { dtype: "f16", mode: 0, nDims: 64, yarn: false, cache: "f16", slot: 4, device: d, fused: true },
          { dtype: "f16", mode: 0, nDims: 32, yarn: true, cache: "f32", slot: 1, device: d, fused: true }
        ] as const
        const cases = all.filter((c) => c.dtype === "f16" ? half : int8)
        for (const c of cases) {
          // 4 query heads and 2 KV heads of 64 over K = 512 (q6_K rows of whole words)
          const K = 512
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [K, 1])
          const ws = yield* qkvWeights(g, c.dtype, K, [256, 128, 128])
          const keys = yield* g.param("keys", c.cache, [128, 9])
          const values = yield* g.param("values", c.cache, [128, 9])
          const pos = yield* g.input("pos", "i32", [1])
          const rows = yield* g.input("rows", "i32", [1])
          const f = c.yarn ? yield* g.param("f", "f32", [c.nDims / 2]) : undefined
          const [q, k, v] = yield* Effect.forEach(ws, (w) => Ops.mulMat(w, x))
          const r = Ops.rope(Ops.reshape(k, [64, 2, 1]), pos, {
            nDims: c.nDims,
            mode: c.mode,
            freqBase: 10000,
            ...(f ? { freqFactors: f, freqScale: 0.25, extFactor: 1, nCtxOrig: 4096 } : {})
          })
          const yq = yield* g.output(Ops.scale(q, 1))
          const yk = yield* g.output(Ops.scale(Ops.setRows(keys, Ops.reshape(r, [128, 1]), rows), 1))
          const yv = yield* g.output(Ops.scale(Ops.setRows(values, v, rows), 1))
          const graph = g.build()
          const backend = yield* c.device.makeBackend()
          const fused = backend.optimize(graph)
          assert.includeMembers(fused.nodes.map((n) => n.op._tag), ["MulMatStack", "RopeSetRowsKv"])
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(c.device, fused, graph, (plan) =>
            Effect.gen(function*() {
              for (const [i, w] of ws.entries()) yield* plan.set(w, weightsFor(w, 10 + i))
              yield* plan.set(x, Generators.values(13, K))
              yield* plan.set(keys, Generators.values(14, 128 * 9))
              yield* plan.set(values, Generators.values(15, 128 * 9))
              yield* plan.set(pos, Int32Array.from([37]))
              yield* plan.set(rows, Int32Array.from([c.slot]))
              if (f) yield* plan.set(f, Generators.values(16, c.nDims / 2).map((z) => 1 + Math.abs(z)))
            }), [yq, yk, yv])
          const what = JSON.stringify({
            ...c,
            device: c.device === d ? "default" : c.device === split ? "split" : c.device === turns ? "turns" : "apart"
          })
          const stack = entries.filter((e) => e.op === "mul_mat_stack")
          assert.strictEqual(stack[0]?.variant?.family, c.dtype === "f16" ? "mvh_stack" : "mvq8_stack", what)
          assert.strictEqual(stack[0]?.variant?.stores, c.fused ? "kv" : undefined, what)
          assert.strictEqual(stack[0]?.variant?.inTurn, c.device === turns ? 3 : undefined, what)
          // split in two, the stores are the merge's
          assert.deepStrictEqual(
            stack.slice(1).map((e) => [e.variant?.family, e.variant?.splits, e.variant?.stores]),
            c.device === split ? [["mvq8_merge", 2, "kv"]] : [],
            what
          )
          assert.strictEqual(entries.some((e) => e.op === "rope_set_rows_kv"), !c.fused, what)
          assert.isBelow(nmse(gpu, cpu), 1e-7, what)
        }
      }),
    120_000
  )

  // a one-row rms_norm * w made by the products that read it (normIn.ts), the int8 form and f16 weights by
  // subgroups: a q/k/v stack (storing nothing) and a gated FFN, each reading the row and the norm's weight
  // instead of the norm, whose dispatch goes; rows of 1536 (every invocation of the reduction holds a part of
  // the sum) and 512, K past the default's 4096 only where asked; a device that norms apart keeps the norms'
  // dispatches
  it.scoped(
    "products that make the norm they read (norm=true) match the CPU's norm and products",
    () =>
      Effect.gen(function*() {
        const [d] = yield* WebGpu.make({ devices: 1 })
        const int8 = WebGpuDevice.hasInt8Dot(d)
        const half = d.description.includes("subgroups") && d.description.includes("shader-f16")
        if (!int8 || !half) console.log(`on ${d.description}: no int8 or no f16-by-subgroups product to norm in`)
        const [apart] = yield* WebGpu.make({ devices: 1, normsInProducts: false })
        const [always] = yield* WebGpu.make({ devices: 1, normsInProducts: true })
        // the row's squares reduced by a tree, not by subgroup sums (the f16 form has subgroups on lavapipe)
        const [tree] = yield* WebGpu.make({ devices: 1, normReduce: "tree" })
        // three workgroups taking the int8 products' row groups in turn, the norm made once by each
        const turns = yield* int8Device({ int8Groups: 3 })
        // the norm read once as b is rounded is the default (normOnce: 32-value types; q4_K keeps its two
        // reads); read twice where asked, and once with the tree and groups in turn
        const twice = yield* int8Device({ normOnce: false })
        const onceTree = yield* int8Device({ int8Groups: 3 }, { normReduce: "tree" })
        const all = [
          { K: 1536, types: "q8_0", ffn: "q4_0", device: d, fused: true },
          { K: 512, types: "q4_K+q4_K+q6_K", ffn: "q4_K", device: d, fused: true },
          { K: 2560, types: "q4_0", ffn: "q4_0", device: d, fused: true },
          { K: 4160, types: "q4_0", ffn: "q4_0", device: d, fused: false },
          { K: 4160, types: "q4_0", ffn: "q4_0", device: always, fused: true },
          { K: 1536, types: "q8_0", ffn: "q4_0", device: apart, fused: false },
          { K: 1536, types: "f16", ffn: "f16", device: d, fused: true },
          { K: 4160, types: "f16", ffn: "f16", device: always, fused: true },
          { K: 1536, types: "f16", ffn: "f16", device: tree, fused: true },
          { K: 2560, types: "q8_0", ffn: "q8_0", device: tree, fused: true },
          { K: 1536, types: "q8_0", ffn: "q4_0", device: turns, fused: true },
          { K: 512, types: "q4_K+q4_K+q6_K", ffn: "q4_K", device: turns, fused: true },
          { K: 1536, types: "q8_0", ffn: "q4_0", device: twice, fused: true },
          { K: 2560, types: "q4_0", ffn: "q8_0", device: onceTree, fused: true },
          { K: 512, types: "q4_K+q4_K+q6_K", ffn: "q4_K", device: twice, fused: true }
        ] as const
        const cases = all.filter((c) => c.types === "f16" ? half : int8)
        for (const c of cases) {
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [c.K, 1])
          const x2 = yield* g.input("x2", "f32", [c.K, 1])
          const [w, w2] = yield* Effect.forEach(["w", "w2"], (n) => g.param(n, "f32", [c.K]))
          const ws = yield* qkvWeights(g, c.types, c.K, [96, 32, 32])
          const norm = Ops.mul(Ops.rmsNorm(x, 1e-5), w)
          const outs = yield* Effect.forEach(ws, (wt) => g.output(Ops.scale(Ops.mulMat(wt, norm), 1)))
          const gate = yield* g.param("gate", c.ffn, [c.K, 80])
          const up = yield* g.param("up", c.ffn, [c.K, 80])
          const norm2 = Ops.mul(Ops.rmsNorm(x2, 1e-5), w2)
          const ffn = yield* g.output(Ops.swiglu(Ops.mulMat(gate, norm2), Ops.mulMat(up, norm2)))
          const graph = g.build()
          const backend = yield* c.device.makeBackend()
          const fused = backend.optimize(graph)
          assert.includeMembers(fused.nodes.map((n) => n.op._tag), ["MulMatStack", "MulMatSwiglu", "RmsNormMul"])
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(c.device, fused, graph, (plan) =>
            Effect.gen(function*() {
              for (const [i, wt] of [...ws, gate, up].entries()) yield* plan.set(wt, weightsFor(wt, 20 + i))
              yield* plan.set(x, Generators.values(30, c.K))
              yield* plan.set(x2, Generators.values(31, c.K))
              yield* plan.set(w, Generators.values(32, c.K).map((z) => 1 + z))
              yield* plan.set(w2, Generators.values(33, c.K).map((z) => 1 - z))
            }), [...outs, ffn])
          const what = JSON.stringify({
            K: c.K,
            types: c.types,
            fused: c.fused,
            tree: c.device === tree || c.device === onceTree,
            twice: c.device === twice
          })
          const normed = entries.filter((e) => e.variant?.norm === true)
          assert.deepStrictEqual(normed.map((e) => e.op), c.fused ? ["mul_mat_stack", "mul_mat_swiglu"] : [], what)
          const treed = c.device === tree || c.device === onceTree
          assert.isTrue(normed.every((e) => e.variant?.normReduce === (treed ? "tree" : undefined)), what)
          const turned = c.device === turns || c.device === onceTree
          assert.isTrue(normed.every((e) => e.variant?.inTurn === (turned ? 3 : undefined)), what)
          const read1 = c.device !== twice && c.types !== "f16" && c.ffn !== "q4_K"
          assert.isTrue(normed.every((e) => e.variant?.normOnce === (read1 ? true : undefined)), what)
          assert.strictEqual(entries.filter((e) => e.op === "rms_norm_mul").length, c.fused ? 0 : 2, what)
          // the CPU rounds its norm to q8_0 / q8_K blocks as the int8 kernel does (to f16 for f16 weights, which
          // the f16 kernel does not): they differ by a rounding flip at most
          assert.isBelow(nmse(gpu, cpu), c.types === "f16" ? 1e-5 : 1e-6, what)
        }
      }),
    240_000
  )

  // attention's split partials merged by the product that reads its result (mergeIn.ts; the int8 form, f16
  // weights by subgroups): a layer's output projection, plain and with the residual added (mul_mat_add), over
  // 3 and 5 splits of the keys, 8 query heads over 2 KV heads of 64 and 128, a masked key; the attention's
  // merge dispatch goes, and a device merging apart, 11 splits (past the most merged in a product) or an
  // output of 2560 values (past the default's 2048; merged where asked) keep it
  it.scoped(
    "a product merging the attention it reads (merge=HxSxDv) matches the CPU's attention and product",
    () =>
      Effect.gen(function*() {
        const [probe] = yield* WebGpu.make({ devices: 1 })
        if (!WebGpuDevice.hasInt8Dot(probe) || !probe.description.includes("subgroups")) {
          console.log(`on ${probe.description}: no int8 product or no decode attention to merge`)
          return
        }
        const half = probe.description.includes("shader-f16")
        // [query heads of D, splits, the residual added, the device's merges (apart, asked, by default), o's
        // type, merged by the product]
        const all = [
          { D: 64, H: 8, splits: 3, bias: false, merges: undefined, wo: "q8_0", merged: true },
          { D: 128, H: 8, splits: 5, bias: true, merges: undefined, wo: "q8_0", merged: true },
          { D: 64, H: 8, splits: 3, bias: true, merges: false, wo: "q8_0", merged: false },
          { D: 64, H: 8, splits: 11, bias: false, merges: undefined, wo: "q8_0", merged: false },
          { D: 64, H: 40, splits: 3, bias: false, merges: undefined, wo: "q8_0", merged: false },
          { D: 64, H: 40, splits: 3, bias: false, merges: true, wo: "q8_0", merged: true },
          { D: 64, H: 8, splits: 3, bias: true, merges: undefined, wo: "f16", merged: true },
          { D: 128, H: 8, splits: 5, bias: false, merges: undefined, wo: "f16", merged: true }
        ] as const
        const cases = all.filter((c) => c.wo !== "f16" || half)
        for (const c of cases) {
          const [d] = yield* WebGpu.make({
            devices: 1,
            attentionDecode: { splits: c.splits },
            ...(c.merges !== undefined ? { mergesInProducts: c.merges } : {})
          })
          const { D, H } = c
          const nKv = 200
          const g = Graph.make()
          const q = yield* g.input("q", "f32", [D, H, 1])
          const k = yield* g.input("k", "f16", [D, nKv, 2])
          const v = yield* g.input("v", "f16", [D, nKv, 2])
          const mask = yield* g.input("mask", "f16", [nKv, 1])
          const wo = yield* g.param("wo", c.wo, [H * D, 96])
          const r = yield* g.input("r", "f32", [96, 1])
          const attn = Ops.flashAttnExt(Ops.permute(q, [0, 2, 1, 3]), k, v, { scale: 0.125, mask })
          const o = Ops.mulMat(wo, Ops.reshape(attn, [H * D, 1]))
          const y = yield* g.output(c.bias ? Ops.add(r, o) : Ops.scale(o, 1))
          const graph = g.build()
          const backend = yield* d.makeBackend()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, backend.optimize(graph), graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(q, Generators.values(1, D * H))
              yield* plan.set(k, Generators.values(2, D * nKv * 2))
              yield* plan.set(v, Generators.values(3, D * nKv * 2))
              yield* plan.set(mask, Generators.values(4, nKv).map((x, j) => (j === 7 ? -Infinity : x)))
              yield* plan.set(wo, weightsFor(wo, 5))
              if (c.bias) {
                yield* plan.set(r, Generators.values(6, 96))
              }
            }), [y])
          const what = JSON.stringify(c)
          const product = entries.find((e) =>
            e.op === (c.bias ? "mul_mat_add" : "mul_mat")
          )
          assert.strictEqual(product?.variant?.family, c.wo === "f16" ? "mvh" : "mvq8", what)
          assert.strictEqual(product?.variant?.merge, c.merged ? `${H}x${c.splits}x${D}` : undefined, what)
          assert.strictEqual(
            entries.some((e) =>
              e.variant?.family === "flash_attn_merge"
            ),
            !c.merged,
            what
          )
          assert.strictEqual(
            entries.find((e) =>
              e.op === "flash_attn_ext"
            )?.variant?.split,
            true,
            what
          )
          // the CPU rounds the attention's output to q8_0 blocks as the int8 kernel does (to f16 for f16
          // weights, which the f16 kernel does not): a rounding flip at most
          assert.isBelow(nmse(gpu, cpu), c.wo === "f16" ? 1e-5 : 1e-6, what)
        }
      }),
    120_000
  )
})
