/** Fusion's f16 activations: which producers write f16 for the products reading them, and the results. */
import type { Tensor } from "@effect-gpu/core"
import { Fusion, Graph, Ops } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { compute, random } from "./utils.js"

describe("Fusion: activations in f16", () => {
  /**
   * a layer's products as a prompt runs them: q and k over a residual sum's norm, gate and up over the
   * next norm, down over their swiglu; `extra` also reads the first norm (a user that is not a product)
   */
  const layer = (extra: boolean) =>
    Effect.gen(function*() {
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [64, 12])
      const r = yield* g.input("r", "f32", [64, 12])
      const w = yield* g.param("w", "f32", [64])
      const weights = yield* Effect.forEach(["wq", "wk", "wg", "wu"], (n) => g.param(n, "f16", [64, 32]))
      const wd = yield* g.param("wd", "f16", [32, 32])
      const n1 = yield* Ops.mul(Ops.rmsNorm(Ops.add(x, r), 1e-6), w)
      const q = yield* Ops.mulMat(weights[0], n1)
      const k = yield* Ops.mulMat(weights[1], n1)
      const n2 = yield* Ops.mul(Ops.rmsNorm(x, 1e-6), w)
      const glu = yield* Ops.mul(Ops.silu(Ops.mulMat(weights[2], n2)), Ops.mulMat(weights[3], n2))
      const down = yield* Ops.mulMat(wd, glu)
      // the products as outputs (a sum of two would fuse one as mul_mat_add, which keeps its b in f32)
      const ys = [yield* g.output(q, "q"), yield* g.output(k, "k"), yield* g.output(down, "down")]
      if (extra) ys.push(yield* g.output(Ops.scale(n1, 2), "other"))
      const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([[x, random(1)(64 * 12)], [r, random(2)(64 * 12)], [
        w,
        random(3)(64)
      ], ...[...weights, wd].map((t, i) => [t, random(4 + i)(t.ne[0] * t.ne[1])] as const)])
      return { graph: g.build(), inputs, ys }
    })

  it.effect("a norm's or a swiglu's result is written in f16 where every user is a product taking it so", () =>
    Effect.gen(function*() {
      const { graph, inputs, ys } = yield* layer(false)
      const producers = (h: Graph.Graph) =>
        h.nodes.filter((n) => ["AddRmsNorm", "RmsNormMul", "Glu"].includes(n.op._tag)).map((n) => n.dtype)
      assert.deepStrictEqual(producers(Fusion.optimize(graph)), ["f32", "f32", "f32"])
      const half = Fusion.optimize(graph, { halfActivations: () => true })
      assert.deepStrictEqual(producers(half), ["f16", "f16", "f16"])
      // every product now reads f16; the same results but for the activations' rounding
      for (const n of half.nodes.filter((n) => n.op._tag === "MulMat")) assert.strictEqual(n.src[1].dtype, "f16")
      const want = (yield* compute(graph, inputs, ys)).flat()
      const got = (yield* compute(half, inputs, ys)).flat()
      const err = want.reduce((s, v, i) => s + (v - got[i]) ** 2, 0) / want.reduce((s, v) => s + v * v, 0)
      assert.isBelow(err, 1e-5)
      assert.isAbove(err, 0)
      // a product that does not take f16 keeps its producer (shared with one that does) in f32
      const some = Fusion.optimize(graph, { halfActivations: (p) => p.src[0].name !== "wk" })
      assert.deepStrictEqual(producers(some), ["f32", "f16", "f16"])
    }))

  it.effect("attention's probabilities (a chain: K·Q, soft_max, V·P) are written in f16 for V·P", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const q = yield* g.input("q", "f32", [32, 12, 4])
      const k = yield* g.input("k", "f16", [32, 20, 2])
      const vt = yield* g.input("vt", "f16", [20, 32, 2])
      const mask = yield* g.input("mask", "f32", [20, 12])
      const scores = Ops.softMax(Ops.mulMat(k, q), { mask, scale: 0.2 })
      const y = yield* g.output(Ops.mulMat(vt, scores), "y")
      const graph = g.build()
      const softMaxes = (h: Graph.Graph) => h.nodes.filter((n) => n.op._tag === "SoftMax").map((n) => n.dtype)
      assert.deepStrictEqual(softMaxes(Fusion.optimize(graph)), ["f32"])
      // only V·P may take it: K·Q's result, which soft_max reads, stays f32
      const asked: Array<string> = []
      const half = Fusion.optimize(graph, { halfActivations: (p) => asked.push(p.src[0].name) > 0 })
      assert.deepStrictEqual(asked, ["vt"])
      assert.deepStrictEqual(softMaxes(half), ["f16"])
      const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([
        [q, random(1)(32 * 12 * 4)],
        [k, random(2)(32 * 20 * 2)],
        [vt, random(3)(20 * 32 * 2)],
        [mask, Array.from({ length: 240 }, (_, i) => (i % 20 <= 8 + Math.floor(i / 20) ? 0 : -Infinity))]
      ])
      // a product of f16 weights rounds its b to f16 as ggml's CPU does: the same results
      const [want, got] = [(yield* compute(graph, inputs, [y]))[0], (yield* compute(half, inputs, [y]))[0]]
      assert.deepStrictEqual(got, want)
    }))

  it.effect("a result that another op reads, or that is an output, stays f32", () =>
    Effect.gen(function*() {
      const { graph, inputs, ys } = yield* layer(true)
      const half = Fusion.optimize(graph, { halfActivations: () => true })
      const norms = half.nodes.filter((n) => n.op._tag === "AddRmsNorm")
      assert.deepStrictEqual(norms.map((n) => n.dtype), ["f32"])
      const want = (yield* compute(graph, inputs, ys)).flat()
      const got = (yield* compute(half, inputs, ys)).flat()
      assert.isBelow(want.reduce((s, v, i) => s + (v - got[i]) ** 2, 0) / want.reduce((s, v) => s + v * v, 0), 1e-5)
      // the norm as an output
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [64, 12])
      const w = yield* g.param("w", "f16", [64, 32])
      const n = yield* g.output(Ops.rmsNorm(x, 1e-6), "n")
      yield* g.output(Ops.mulMat(w, n), "p")
      const out = Fusion.optimize(g.build(), { halfActivations: () => true })
      assert.strictEqual(out.nodes.find((t) => t.op._tag === "RmsNorm")?.dtype, "f32")
    }))
})
