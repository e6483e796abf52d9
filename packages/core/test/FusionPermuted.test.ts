/**
 * Fusion's mul_mat_permuted: a product whose one reader is a contiguous copy of it permuted (attention's
 * V·P into [D, heads, tokens]) becomes one node that stores the product permuted; the CPU computes it as the
 * two did. Refused where the product or its permute has another reader, the permutation moves axis 0, or
 * the backend says no; the probabilities V·P reads stay f16 where asked.
 */
import type { Tensor } from "@effect-gpu/core"
import { Fusion, Graph, Ops } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { compute, random } from "./utils.js"

/** soft_max(x) then V·P for 4 heads over 2 KV heads, permuted as attention's chain ends; `also` reads V·P */
const chain = (axes: readonly [number, number, number, number], also: boolean) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const vt = yield* g.input("vt", "f32", [24, 16, 2])
    const x = yield* g.input("x", "f32", [24, 10, 4])
    const pv = yield* Ops.mulMat(vt, Ops.softMax(x, { scale: 0.5 }))
    const ys = [yield* g.output(Ops.cont(Ops.permute(pv, axes)), "o")]
    if (also) ys.push(yield* g.output(Ops.scale(pv, 2), "also"))
    const inputs = new Map<Tensor.Tensor, ReadonlyArray<number>>([[vt, random(1)(24 * 16 * 2)], [
      x,
      random(2)(24 * 10 * 4)
    ]])
    return { graph: g.build(), inputs, ys }
  })

const ops = (h: Graph.Graph) => h.nodes.map((n) => n.op._tag)

describe("Fusion: products stored permuted", () => {
  it.effect("cont(permute(mul_mat)) keeping axis 0 is one mul_mat_permuted, computing the same values", () =>
    Effect.gen(function*() {
      for (const axes of [[0, 2, 1, 3], [0, 3, 1, 2]] as const) {
        const { graph, inputs, ys } = yield* chain(axes, false)
        const asked: Array<ReadonlyArray<number>> = []
        const fused = Fusion.optimize(graph, { mulMatPermuted: (_, a) => (asked.push(a), true) })
        assert.deepStrictEqual(asked, [axes])
        assert.notInclude(ops(fused), "Cont")
        assert.notInclude(ops(fused), "MulMat")
        const node = fused.nodes.find((n) => n.op._tag === "MulMatPermuted")!
        assert.deepStrictEqual(node.op, { _tag: "MulMatPermuted", axes })
        assert.deepStrictEqual(node.ne, ys[0].ne)
        const want = (yield* compute(graph, inputs, ys)).flat()
        const got = (yield* compute(fused, inputs, ys)).flat()
        assert.deepStrictEqual(got, want)
      }
    }))

  it.effect("refused where the product has another reader, axis 0 moves, or the backend says no", () =>
    Effect.gen(function*() {
      const read = yield* chain([0, 2, 1, 3], true)
      assert.include(ops(Fusion.optimize(read.graph, { mulMatPermuted: () => true })), "Cont")
      const moved = yield* chain([1, 0, 2, 3], false)
      assert.include(ops(Fusion.optimize(moved.graph, { mulMatPermuted: () => true })), "Cont")
      const plain = yield* chain([0, 2, 1, 3], false)
      assert.include(ops(Fusion.optimize(plain.graph, { mulMatPermuted: () => false })), "Cont")
      assert.include(ops(Fusion.optimize(plain.graph)), "Cont")
    }))

  it.effect("the probabilities V·P reads are written in f16 where the product takes them so", () =>
    Effect.gen(function*() {
      const { graph } = yield* chain([0, 2, 1, 3], false)
      const fused = Fusion.optimize(graph, { mulMatPermuted: () => true, halfActivations: () => true })
      const node = fused.nodes.find((n) => n.op._tag === "MulMatPermuted")!
      assert.strictEqual(node.src[1].op._tag, "SoftMax")
      assert.strictEqual(node.src[1].dtype, "f16")
    }))
})
