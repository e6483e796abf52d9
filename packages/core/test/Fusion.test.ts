import type { Tensor } from "@effect-gpu/core"
import { Cpu, Fusion, Graph, Ops, Quant } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { close, compute, random } from "./utils.js"

describe("Fusion", () => {
  it.effect("rotates keys as it stores them (rope then set_rows) only where the backend asks; same cache", () =>
    Effect.gen(function*() {
      for (const mode of [0, 2] as const) {
        const g = Graph.make()
        const cache = yield* g.param("cache", "f32", [24, 6])
        const k = yield* g.input("k", "f32", [8, 3, 2])
        const pos = yield* g.input("pos", "i32", [2])
        const rows = yield* g.input("rows", "i32", [2])
        const r = Ops.rope(k, pos, { nDims: 8, mode, freqBase: 10000 })
        const y = yield* g.output(Ops.scale(Ops.setRows(cache, Ops.reshape(r, [24, 2]), rows), 1), "y")
        const graph = g.build()
        const tags = (f: Graph.Graph) => f.nodes.map((n) => n.op._tag)
        assert.notInclude(tags(Fusion.optimize(graph)), "RopeSetRows")
        const fused = Fusion.optimize(graph, { ropeSetRows: true })
        assert.include(tags(fused), "RopeSetRows")
        assert.notInclude(tags(fused), "Rope")
        const run = (h: Graph.Graph) =>
          Effect.scoped(Effect.gen(function*() {
            const backend = yield* Cpu.make().makeBackend()
            const plan = yield* backend.allocate(h)
            yield* plan.set(cache, random(1)(24 * 6))
            yield* plan.set(k, random(2)(8 * 3 * 2))
            yield* plan.set(pos, Int32Array.from([5, 9]))
            yield* plan.set(rows, Int32Array.from([4, 1]))
            yield* backend.compute(plan)
            return Array.from(yield* plan.get(y))
          }))
        assert.isTrue(close(yield* run(fused), yield* run(graph)), `mode ${mode}`)
      }
    }))

  // two layers of a cache, each storing its keys (rotated) and its values at the same positions, the second
  // layer's keys and values computed from what the first stored: each layer's two stores become one node
  // (never one layer's keys with another's values, and whichever store the graph lists first), the caches
  // as the unfused graph leaves them, and an index past a table refused as before the fusion
  it.effect("stores a layer's values with its rotated keys only where the backend asks; same caches", () =>
    Effect.gen(function*() {
      for (const valuesFirst of [false, true]) {
        const g = Graph.make()
        const k = yield* g.input("k", "f32", [8, 3, 2])
        const v = yield* g.input("v", "f32", [24, 2])
        const pos = yield* g.input("pos", "i32", [2])
        const rows = yield* g.input("rows", "i32", [2])
        const caches: Array<Tensor.Tensor> = []
        let [kIn, vIn]: [Tensor.Tensor, Tensor.Tensor] = [k, v]
        for (let l = 0; l < 2; l++) {
          const ck = yield* g.param(`ck${l}`, "f32", [24, 6])
          const cv = yield* g.param(`cv${l}`, "f32", [24, 6])
          const r = Ops.rope(kIn, pos, { nDims: 8, mode: 0, freqBase: 10000 })
          const sk = Ops.view(Ops.setRows(ck, Ops.reshape(r, [24, 2]), rows), [24, 2], [96, 96], 0)
          const sv = Ops.view(Ops.setRows(cv, vIn, rows), [24, 2], [96, 96], 0)
          // the next layer's inputs read both stores (as attention reads the caches); the graph lists the
          // stores in the order the sum reads them
          const both = yield* (valuesFirst ? Ops.add(sv, sk) : Ops.add(sk, sv))
          kIn = yield* Ops.reshape(both, [8, 3, 2])
          vIn = yield* Ops.scale(both, 0.5)
          caches.push(ck, cv)
        }
        const y = yield* g.output(Ops.add(kIn, kIn), "y")
        const graph = g.build()
        const tags = (f: Graph.Graph) => f.nodes.map((n) => n.op._tag)
        assert.notInclude(tags(Fusion.optimize(graph, { ropeSetRows: true })), "RopeSetRowsKv")
        const fused = Fusion.optimize(graph, { ropeSetRows: true, ropeSetRowsKv: true })
        assert.strictEqual(tags(fused).filter((t) => t === "RopeSetRowsKv").length, 2)
        assert.notInclude(tags(fused), "SetRows")
        const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([
          [k, random(2)(8 * 3 * 2)],
          [v, random(3)(24 * 2)],
          [pos, [5, 9]],
          [rows, [4, 1]],
          ...caches.map((c, i) => [c, random(10 + i)(24 * 6)] as const)
        ])
        const [want, got] = [yield* compute(graph, inputs, [y]), yield* compute(fused, inputs, [y])]
        assert.isTrue(close(got[0], want[0]), `valuesFirst ${valuesFirst}`)
        // the caches too: read back through a plan of the fused graph
        const read = (h: Graph.Graph) =>
          Effect.scoped(Effect.gen(function*() {
            const backend = yield* Cpu.make().makeBackend()
            const plan = yield* backend.allocate(h)
            for (const [t, values] of inputs) yield* plan.set(t, values)
            yield* backend.compute(plan)
            const out: Array<number> = []
            for (const c of caches) out.push(...(yield* plan.get(c)))
            const refused = yield* Effect.flip(plan.set(rows, [4, 6]))
            return { out, refused }
          }))
        const [a, b] = [yield* read(graph), yield* read(fused)]
        assert.isTrue(close(b.out, a.out), `caches, valuesFirst ${valuesFirst}`)
        assert.strictEqual(b.refused._tag, "OutOfBounds")
      }
      // a set_rows whose rows read the keys' store is not stored with it (the node would feed itself)
      const g = Graph.make()
      const k = yield* g.input("k", "f32", [8, 3, 2])
      const pos = yield* g.input("pos", "i32", [2])
      const rows = yield* g.input("rows", "i32", [2])
      const [ck, cv] = [yield* g.param("ck", "f32", [24, 6]), yield* g.param("cv", "f32", [24, 6])]
      const r = Ops.rope(k, pos, { nDims: 8, mode: 0, freqBase: 10000 })
      const sk = Ops.view(Ops.setRows(ck, Ops.reshape(r, [24, 2]), rows), [24, 2], [96, 96], 0)
      yield* g.output(Ops.scale(Ops.setRows(cv, Ops.scale(sk, 2), rows), 1), "y")
      const fused = Fusion.optimize(g.build(), { ropeSetRows: true, ropeSetRowsKv: true })
      assert.deepStrictEqual(fused.nodes.map((n) => n.op._tag).filter((t) => t.endsWith("SetRows")), [
        "RopeSetRows",
        "SetRows"
      ])
    }))

  it.effect("rotates q as attention reads it (rope, permute, flash_attn_ext) only where the backend asks; same results", () =>
    Effect.gen(function*() {
      // normal and neox modes, frequency factors and YaRN once; two query rows at their own positions over
      // grouped KV heads; q a view of a wider product's rows, as a stacked q, k and v make it
      for (const [mode, factors, yarn] of [[0, false, false], [2, true, true]] as const) {
        const g = Graph.make()
        const qkv = yield* g.input("qkv", "f32", [8 * 4 + 16, 2])
        const k = yield* g.input("k", "f32", [8, 5, 2])
        const v = yield* g.input("v", "f32", [8, 5, 2])
        const pos = yield* g.input("pos", "i32", [2])
        const mask = yield* g.input("mask", "f32", [5, 2])
        const f = factors ? yield* g.param("f", "f32", [3]) : undefined
        const q = Ops.view(qkv, [8, 4, 2], [8 * 4, qkv.nb[1]], 0)
        const r = Ops.rope(q, pos, {
          nDims: 6,
          mode,
          freqBase: 10000,
          ...(f ? { freqFactors: f } : {}),
          ...(yarn ? { extFactor: 1, freqScale: 0.25, nCtxOrig: 64, attnFactor: 1 } : {})
        })
        const y = yield* g.output(Ops.flashAttnExt(Ops.permute(r, [0, 2, 1, 3]), k, v, { scale: 0.3, mask }), "y")
        const graph = g.build()
        const tags = (h: Graph.Graph) => h.nodes.map((n) => n.op._tag)
        assert.notInclude(tags(Fusion.optimize(graph)), "RopeFlashAttnExt")
        assert.notInclude(tags(Fusion.optimize(graph, { ropeAttention: () => false })), "RopeFlashAttnExt")
        const fused = Fusion.optimize(graph, { ropeAttention: () => true })
        assert.include(tags(fused), "RopeFlashAttnExt")
        assert.notInclude(tags(fused), "Rope")
        const run = (h: Graph.Graph) =>
          Effect.scoped(Effect.gen(function*() {
            const backend = yield* Cpu.make().makeBackend()
            const plan = yield* backend.allocate(h)
            yield* plan.set(qkv, random(1)(48 * 2))
            yield* plan.set(k, random(2)(8 * 5 * 2))
            yield* plan.set(v, random(3)(8 * 5 * 2))
            yield* plan.set(pos, Int32Array.from([3, 40]))
            yield* plan.set(mask, Float32Array.from({ length: 10 }, (_, i) => (i === 4 ? -Infinity : 0)))
            if (f) yield* plan.set(f, Float32Array.from([1, 2.5, 4]))
            yield* backend.compute(plan)
            return Array.from(yield* plan.get(y))
          }))
        const [got, want] = [yield* run(fused), yield* run(graph)]
        assert.isTrue(close(got, want), `mode ${mode}: ${got.slice(0, 4)} against ${want.slice(0, 4)}`)
      }
    }))

  it.effect("keeps a residual sum beside its next norm only where the backend asks, for one row; same results", () =>
    Effect.gen(function*() {
      for (const rows of [1, 3]) {
        const g = Graph.make()
        const x = yield* g.input("x", "f32", [32, rows])
        const r = yield* g.input("r", "f32", [32, rows])
        const w = yield* g.param("w", "f32", [32])
        const wo = yield* g.param("wo", "f32", [32, 32])
        // the residual stream: s feeds the norm and the next sum
        const s = yield* Ops.add(x, r)
        const h = yield* Ops.mul(Ops.rmsNorm(s, 1e-5), w)
        const y = yield* g.output(Ops.add(s, Ops.mulMat(wo, h)), "y")
        const graph = g.build()
        const tags = (f: Graph.Graph) => f.nodes.map((n) => n.op._tag)
        assert.notInclude(tags(Fusion.optimize(graph)), "AddRmsNormKeep")
        const fused = Fusion.optimize(graph, { addRmsNormKeep: true })
        assert.strictEqual(tags(fused).includes("AddRmsNormKeep"), rows === 1, `${rows} rows`)
        if (rows === 1) assert.notInclude(tags(fused), "RmsNorm")
        const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([
          [x, random(1)(32 * rows)],
          [r, random(2)(32 * rows)],
          [w, random(3)(32)],
          [wo, random(4)(32 * 32)]
        ])
        const [want] = yield* compute(graph, inputs, [y])
        const [got] = yield* compute(fused, inputs, [y])
        assert.isTrue(close(got, want), `${rows} rows`)
      }
    }))

  it.effect("stores a many-row residual sum over the stream before it by its norm where the backend asks; same results", () =>
    Effect.gen(function*() {
      /**
       * a residual stream through `layers` of x += W norm(x) from a computed start (x0 = 2 e); `extra`: the
       * start also read after the first sum by an op its product does not need
       */
      const stream = (layers: number, extra: boolean) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const e = yield* g.input("e", "f32", [32, 5])
          const w = yield* g.param("w", "f32", [32])
          const ws = yield* Effect.forEach(Array.from({ length: layers + 1 }, (_, l) => l), (l) =>
            g.param(`w${l}`, "f32", [32, 32]))
          const x0 = yield* Ops.scale(e, 2)
          let x = x0
          for (let l = 0; l < layers; l++) {
            x = yield* Ops.add(x, Ops.mulMat(ws[l], Ops.mul(Ops.rmsNorm(x, 1e-5), w)))
          }
          const ys = [yield* g.output(Ops.mulMat(ws[layers], Ops.mul(Ops.rmsNorm(x, 1e-5), w)), "y")]
          if (extra) {
            ys.push(yield* g.output(Ops.scale(x0, 3), "late"))
          }
          const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([
            [e, random(1)(32 * 5)],
            [w, random(2)(32)],
            ...ws.map((t, l) =>
              [t, random(3 + l)(32 * 32)] as const
            )
          ])
          return { graph: g.build(), inputs, ys }
        })
      const tags = (f: Graph.Graph) => f.nodes.map((n) => n.op._tag)
      const { graph, inputs, ys } = yield* stream(3, false)
      assert.notInclude(tags(Fusion.optimize(graph)), "AddRmsNormStore")
      const fused = Fusion.optimize(graph, { addRmsNormStore: true })
      // the two sums the next sum reads too made by their norms, stored over the stream (each a view of the
      // start's memory); the last, read by its norm alone, not kept (add_rms_norm): no add is left
      assert.deepStrictEqual(tags(fused).filter((t) => t.startsWith("AddRmsNorm")), [
        "AddRmsNormStore",
        "AddRmsNormStore",
        "AddRmsNorm"
      ])
      assert.notInclude(tags(fused), "Add")
      const start = fused.nodes.find((n) => n.op._tag === "Scale")!
      const sums = fused.nodes.filter((n) => n.op._tag === "View" && n.src.some((s) => s.op._tag === "AddRmsNormStore"))
      assert.strictEqual(sums.length, 2)
      assert.isTrue(sums.every((v) => v.viewSrc === start && v.viewOffset === 0))
      const [want, got] = [yield* compute(graph, inputs, ys), yield* compute(fused, inputs, ys)]
      assert.isTrue(close(got[0], want[0]))
      // the start read after the first sum (not before what that sum adds): the first sum keeps its add
      const late = yield* stream(3, true)
      const some = Fusion.optimize(late.graph, { addRmsNormStore: true })
      assert.strictEqual(tags(some).filter((t) => t === "AddRmsNormStore").length, 1)
      assert.strictEqual(tags(some).filter((t) => t === "Add").length, 1)
      const [want2, got2] = [
        yield* compute(late.graph, late.inputs, late.ys),
        yield* compute(some, late.inputs, late.ys)
      ]
      assert.isTrue(close(got2[0], want2[0]) && close(got2[1], want2[1]))
      // one row: kept beside its norm where asked, never stored
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [32, 1])
      const w = yield* g.param("w", "f32", [32])
      const s = yield* Ops.add(Ops.scale(x, 2), Ops.scale(x, 3))
      yield* g.output(Ops.add(s, Ops.mul(Ops.rmsNorm(s, 1e-5), w)), "y")
      assert.notInclude(tags(Fusion.optimize(g.build(), { addRmsNormStore: true })), "AddRmsNormStore")
    }))

  it.effect("leaves a one-row norm to its readers where the backend asks, its sum to the product before; same results", () =>
    Effect.gen(function*() {
      for (const rows of [1, 3]) {
        const g = Graph.make()
        const x = yield* g.input("x", "f32", [32, rows])
        const a = yield* g.input("a", "f32", [32, rows])
        const w = yield* g.param("w", "f32", [32])
        const [wo, wq, wd] = yield* Effect.forEach(["wo", "wq", "wd"], (n) => g.param(n, "f32", [32, 32]))
        // a layer's output added to the residual stream (x + W a), its norm read by a product
        const s = yield* Ops.add(x, Ops.mulMat(wo, a))
        const q = yield* g.output(Ops.mulMat(wq, Ops.mul(Ops.rmsNorm(s, 1e-5), w)), "q")
        const y = yield* g.output(Ops.add(s, Ops.mulMat(wd, q)), "y")
        const graph = g.build()
        const tags = (f: Graph.Graph) => f.nodes.map((n) => n.op._tag)
        const asked: Array<ReadonlyArray<string>> = []
        const fused = Fusion.optimize(graph, {
          addRmsNormKeep: true,
          normsInProducts: (norm, readers) => {
            asked.push(readers.map((r) => r.op._tag))
            return norm.ne[0] === 32
          }
        })
        const kept = Fusion.optimize(graph, { addRmsNormKeep: true, normsInProducts: () => false })
        assert.deepStrictEqual(asked, rows === 1 ? [["MulMat"]] : [], `${rows} rows`)
        // one row: both sums made by their products (the residual as the bias); the norm its own node
        assert.strictEqual(tags(fused).filter((t) => t === "MulMatAdd").length, rows === 1 ? 2 : 0, `${rows} rows`)
        assert.include(tags(fused), "RmsNormMul")
        assert.notInclude(tags(fused), "AddRmsNormKeep")
        assert.strictEqual(tags(kept).includes("AddRmsNormKeep"), rows === 1, `${rows} rows`)
        const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([
          [x, random(1)(32 * rows)],
          [a, random(2)(32 * rows)],
          [w, random(3)(32)],
          [wo, random(4)(32 * 32)],
          [wq, random(5)(32 * 32)],
          [wd, random(6)(32 * 32)]
        ])
        const want = yield* compute(graph, inputs, [q, y])
        for (const f of [fused, kept]) {
          const got = yield* compute(f, inputs, [q, y])
          assert.isTrue(close(got[0], want[0]) && close(got[1], want[1]), `${rows} rows`)
        }
      }
    }))

  it.effect("makes a many-row residual sum (x + W a) with its product only where the backend asks; same results", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [32, 5])
      const a = yield* g.input("a", "f32", [32, 5])
      const wo = yield* g.param("wo", "f32", [32, 32])
      const y = yield* g.output(Ops.add(x, Ops.mulMat(wo, a)), "y")
      const graph = g.build()
      const tags = (f: Graph.Graph) => f.nodes.map((n) => n.op._tag)
      const asked = Fusion.optimize(graph, { residualProducts: true })
      assert.include(tags(asked), "MulMatAdd")
      assert.notInclude(tags(asked), "Add")
      assert.include(tags(Fusion.optimize(graph, {})), "Add")
      assert.notInclude(tags(Fusion.optimize(graph, {})), "MulMatAdd")
      const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([
        [x, random(1)(32 * 5)],
        [a, random(2)(32 * 5)],
        [wo, random(3)(32 * 32)]
      ])
      const [want] = yield* compute(graph, inputs, [y])
      const [got] = yield* compute(asked, inputs, [y])
      assert.isTrue(close(got, want))
    }))

  it.effect("stacks products sharing their activations only where the backend asks; their views give the same results", () =>
    Effect.gen(function*() {
      for (const dtype of ["f32", "q8_0"] as const) {
        const g = Graph.make()
        const wq = yield* g.param("wq", dtype, [64, 12])
        const wk = yield* g.param("wk", dtype, [64, 4])
        const wv = yield* g.param("wv", dtype, [64, 4])
        const x = yield* g.input("x", "f32", [64, 1])
        const q = Ops.reshape(Ops.mulMat(wq, x), [4, 3])
        const k = Ops.reshape(Ops.mulMat(wk, x), [4, 1])
        // k's view read through a transpose, v used twice: each consumer sees its own product's rows
        const y = yield* g.output(Ops.mulMat(Ops.cont(Ops.transpose(Ops.transpose(k))), q), "y")
        const v = yield* Ops.mulMat(wv, x)
        const z = yield* g.output(Ops.add(v, Ops.scale(v, 2)), "z")
        const graph = g.build()
        const tags = (h: Graph.Graph) => h.nodes.map((n) => n.op._tag)
        assert.notInclude(tags(Fusion.optimize(graph)), "MulMatStack")
        const asked: Array<string> = []
        const fused = Fusion.optimize(graph, {
          mulMatStack: (weights) => {
            asked.push(weights.map((w) => w.name).sort().join(","))
            return true
          }
        })
        assert.deepStrictEqual(asked, ["wk,wq,wv"])
        assert.strictEqual(tags(fused).filter((t) => t === "MulMatStack").length, 1)
        assert.isFalse(
          tags(fused).includes("MulMat") && fused.nodes.some((n) => n.op._tag === "MulMat" && n.src[1] === x)
        )
        const run = (h: Graph.Graph) =>
          Effect.scoped(Effect.gen(function*() {
            const backend = yield* Cpu.make().makeBackend()
            const plan = yield* backend.allocate(h)
            for (const [t, seed, n] of [[wq, 1, 64 * 12], [wk, 2, 64 * 4], [wv, 3, 64 * 4]] as const) {
              const values = Float32Array.from(random(seed)(n))
              yield* plan.set(t, dtype === "f32" ? values : Quant.unsafeQuantize(dtype, values))
            }
            yield* plan.set(x, random(4)(64))
            yield* backend.compute(plan)
            return [Array.from(yield* plan.get(y)), Array.from(yield* plan.get(z))]
          }))
        const [want, got] = [yield* run(graph), yield* run(fused)]
        assert.isTrue(close(got[0], want[0]), `${dtype} y`)
        assert.isTrue(close(got[1], want[1]), `${dtype} z`)
      }
      // products of several columns are never stacked: each would be a strided view, and q's reshape into
      // heads takes it to be contiguous
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [64, 3])
      const [wq, wk] = [yield* g.param("wq", "f32", [64, 12]), yield* g.param("wk", "f32", [64, 4])]
      yield* g.output(Ops.reshape(Ops.mulMat(wq, x), [4, 3, 3]), "q")
      yield* g.output(Ops.reshape(Ops.mulMat(wk, x), [2, 2, 3]), "k")
      const asked: Array<number> = []
      const kept = Fusion.optimize(g.build(), { mulMatStack: (w) => asked.push(w.length) > 0 })
      assert.deepStrictEqual(asked, [])
      assert.notInclude(kept.nodes.map((n) => n.op._tag), "MulMatStack")
    }))

  it.effect("fuses a product over stacked gate and up weights with the swiglu of its halves; same results", () =>
    Effect.gen(function*() {
      /** swiglu over the rows [0, 10) and [at, at + 10) of a product over 20-row weights */
      const build = (dtype: "f32" | "f16", at: number, productOut: boolean) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const w = yield* g.param("gate_up", dtype, [64, 20])
          const x = yield* g.input("x", "f32", [64, 5])
          const both = yield* Ops.mulMat(w, x)
          const gate = yield* Ops.view(both, [10, 5], [both.nb[1]], 0)
          const up = yield* Ops.view(both, [10, 5], [both.nb[1]], at * both.nb[0])
          const y = yield* g.output(Ops.swiglu(gate, up), "y")
          if (productOut) yield* g.output(Ops.scale(both, 1), "both")
          const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([[w, random(1)(64 * 20)], [
            x,
            random(2)(64 * 5)
          ]])
          return { graph: g.build(), w, y, inputs }
        })
      const tags = (h: Graph.Graph) => h.nodes.map((n) => n.op._tag)
      for (const dtype of ["f32", "f16"] as const) {
        const { graph, inputs, w, y } = yield* build(dtype, 10, false)
        assert.notInclude(tags(Fusion.optimize(graph)), "MulMatSwiglu")
        const asked: Array<Tensor.Tensor> = []
        const fused = Fusion.optimize(graph, { mulMatSwiglu: (gate, up) => asked.push(gate, up) > 0 })
        // gate and up are views of the weights' two halves
        assert.strictEqual(asked.length, 2)
        assert.deepStrictEqual(asked.map((t) => [t.viewSrc === w, t.viewOffset, t.ne[1]]), [[true, 0, 10], [
          true,
          10 * w.nb[1],
          10
        ]])
        assert.deepStrictEqual(tags(fused).filter((t) => t.startsWith("MulMat")), ["MulMatSwiglu"])
        const [want, got] = [yield* compute(graph, inputs, [y]), yield* compute(fused, inputs, [y])]
        assert.isTrue(close(got[0], want[0]), dtype)
      }
      // a norm before the stack, its result written in f16 for the fused product as for the product it replaces
      const g = Graph.make()
      const w = yield* g.param("gate_up", "f16", [64, 20])
      const x = yield* g.input("x", "f32", [64, 5])
      const nw = yield* g.param("nw", "f32", [64])
      const both = yield* Ops.mulMat(w, Ops.mul(Ops.rmsNorm(x, 1e-6), nw))
      const halfOf = (at: number) => Ops.view(both, [10, 5], [both.nb[1]], at * both.nb[0])
      yield* g.output(Ops.swiglu(halfOf(0), halfOf(10)), "y")
      const half = Fusion.optimize(g.build(), { mulMatSwiglu: () => true, halfActivations: () => true })
      const gated = half.nodes.find((n) => n.op._tag === "MulMatSwiglu")
      assert.deepStrictEqual([gated?.src[2].op._tag, gated?.src[2].dtype], ["RmsNormMul", "f16"])
      // not halves (up from row 8), or the product read by another op: left as they are
      for (const [at, productOut] of [[8, false], [10, true]] as const) {
        const { graph } = yield* build("f32", at, productOut)
        const asked: Array<Tensor.Tensor> = []
        const kept = Fusion.optimize(graph, { mulMatSwiglu: (gate) => asked.push(gate) > 0 })
        assert.deepStrictEqual(asked, [], `up at ${at}`)
        assert.notInclude(tags(kept), "MulMatSwiglu")
      }
    }))

  it.effect("fuses a gated FFN's two products and swiglu only where the backend asks; same results", () =>
    Effect.gen(function*() {
      for (const dtype of ["f32", "q4_0"] as const) {
        const g = Graph.make()
        const gate = yield* g.param("gate", dtype, [64, 10])
        const up = yield* g.param("up", dtype, [64, 10])
        const other = yield* g.param("other", dtype, [64, 10])
        const x = yield* g.input("x", "f32", [64, 3])
        const y = yield* g.output(Ops.swiglu(Ops.mulMat(gate, x), Ops.mulMat(up, x)), "y")
        // products over different activations do not fuse
        const x2 = yield* g.input("x2", "f32", [64, 3])
        const z = yield* g.output(Ops.swiglu(Ops.mulMat(other, x), Ops.mulMat(up, x2)), "z")
        const graph = g.build()
        const tags = (h: Graph.Graph) => h.nodes.map((n) => n.op._tag)
        assert.notInclude(tags(Fusion.optimize(graph)), "MulMatSwiglu")
        const asked: Array<string> = []
        const fused = Fusion.optimize(graph, {
          mulMatSwiglu: (a, b) => {
            asked.push(`${a.name}/${b.name}`)
            return true
          }
        })
        assert.deepStrictEqual(asked, ["gate/up"])
        assert.strictEqual(tags(fused).filter((t) => t === "MulMatSwiglu").length, 1)
        assert.strictEqual(tags(fused).filter((t) => t === "MulMat").length, 2)
        const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([[x, random(4)(64 * 3)], [x2, random(5)(64 * 3)]])
        const weights = [[gate, 1], [up, 2], [other, 3]] as const
        const set = (graph: Graph.Graph) =>
          Effect.scoped(Effect.gen(function*() {
            const backend = yield* Cpu.make().makeBackend()
            const plan = yield* backend.allocate(graph)
            for (const [t, seed] of weights) {
              const v = Float32Array.from(random(seed)(640))
              yield* plan.set(t, dtype === "f32" ? v : Quant.unsafeQuantize("q4_0", v))
            }
            for (const [t, v] of inputs) yield* plan.set(t, v)
            yield* backend.compute(plan)
            return [Array.from(yield* plan.get(y)), Array.from(yield* plan.get(z))]
          }))
        const [want, got] = [yield* set(graph), yield* set(fused)]
        assert.isTrue(close(got[0], want[0]), dtype)
        assert.isTrue(close(got[1], want[1]), dtype)
      }
    }))

  it.effect("fuses add + rms_norm + mul, rms_norm + mul, mul_mat + bias and silu * gate; same results", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [16, 3])
      const r = yield* g.input("r", "f32", [16, 3])
      const w = yield* g.param("w", "f32", [16])
      const wq = yield* g.param("wq", "f32", [16, 8])
      const bias = yield* g.param("bias", "f32", [8])
      const wg = yield* g.param("wg", "f32", [8, 8])
      const h = yield* Ops.mul(Ops.rmsNorm(Ops.add(x, r), 1e-6), w)
      const n2 = yield* Ops.mul(Ops.rmsNorm(h, 1e-6), w)
      const q = yield* Ops.add(Ops.mulMat(wq, n2), bias)
      const y = yield* g.output(Ops.mul(Ops.silu(q), Ops.mulMat(wg, q)), "y")
      const graph = g.build()
      const fused = Fusion.optimize(graph)
      assert.deepStrictEqual(
        fused.nodes.map((n) => n.op._tag),
        ["AddRmsNorm", "RmsNormMul", "MulMatAdd", "MulMat", "Glu"]
      )
      // the original output resolves to the tensor that now computes it
      assert.strictEqual(Graph.resolve(fused, y), fused.outputs[0])
      const next = random(3)
      const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([
        [x, next(48)],
        [r, next(48)],
        [w, next(16)],
        [wq, next(128)],
        [bias, next(8)],
        [wg, next(64)]
      ])
      const [plain] = yield* compute(graph, inputs, [y])
      const [optimized] = yield* compute(fused, inputs, [y])
      assert.isTrue(close(optimized, plain))
    }))

  it.effect("leaves a chain alone when an inner result has another user or is an output", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [16, 3])
      const w = yield* g.param("w", "f32", [16])
      // the norm is read twice: fusing it into one user would lose it for the other
      const norm = yield* Ops.rmsNorm(x, 1e-6)
      yield* g.output(Ops.add(Ops.mul(norm, w), norm))
      assert.isFalse(Fusion.optimize(g.build()).nodes.some((n) => n.op._tag === "RmsNormMul"))
      // the norm is an output: it must be kept
      const h = Graph.make()
      const x2 = yield* h.input("x", "f32", [16, 3])
      const norm2 = yield* h.output(Ops.rmsNorm(x2, 1e-6))
      yield* h.output(Ops.mul(norm2, w))
      const optimized = Fusion.optimize(h.build())
      assert.deepStrictEqual(optimized.nodes.map((n) => n.op._tag), ["RmsNorm", "Mul"])
    }))

  it.effect("a graph with nothing to fuse comes back as it is", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [4])
      yield* g.output(Ops.exp(Ops.scale(x, 2)))
      const graph = g.build()
      assert.strictEqual(Fusion.optimize(graph), graph)
    }))
})
