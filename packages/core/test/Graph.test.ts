import { Graph, Ops } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

describe("Graph", () => {
  it.effect("orders sources before users and splits leafs from nodes", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const a = yield* g.input("a", "f32", [4, 4])
      const b = yield* g.param("b", "f32", [4, 4])
      const ab = yield* Ops.mulMat(a, b)
      const y = yield* g.output(Ops.add(ab, Ops.relu(ab)), "y")
      const graph = g.build()
      assert.deepStrictEqual(graph.leafs, [a, b])
      assert.strictEqual(graph.nodes.length, 3)
      assert.strictEqual(graph.nodes[0], ab)
      assert.strictEqual(graph.nodes[2], y)
      assert.deepStrictEqual(graph.outputs, [y])
      assert.strictEqual(y.name, "y")
      assert.isTrue((y.flags & 2) !== 0)
    }))

  it.effect("sorts a chain of 100 000 nodes without overflowing the stack", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      let t = yield* g.input("x", "f32", [2])
      for (let i = 0; i < 100_000; i++) t = yield* Ops.scale(t, 1.0001)
      yield* g.output(t)
      const graph = g.build()
      assert.strictEqual(graph.nodes.length, 100_000)
      assert.strictEqual(graph.leafs.length, 1)
      for (let i = 1; i < graph.nodes.length; i++) assert.strictEqual(graph.nodes[i].src[0], graph.nodes[i - 1])
    }), 60_000)
})

describe("op effects", () => {
  it.effect("an op's effect makes one tensor however often it is yielded or passed on", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const w = yield* g.param("w", "f32", [4, 4])
      const x = yield* g.input("x", "f32", [4, 2])
      const b = yield* g.param("b", "f32", [4])
      const pre = Ops.add(Ops.mulMat(w, x), b)
      const gelu = yield* Ops.gelu(pre)
      const silu = yield* Ops.silu(pre)
      assert.strictEqual(gelu.src[0], silu.src[0])
      assert.strictEqual(yield* pre, yield* pre)
      yield* g.output(Ops.add(gelu, silu))
      // one mul_mat, one add for the bias, gelu, silu and their sum
      assert.deepStrictEqual(g.build().nodes.map((n) => n.op._tag), ["MulMat", "Add", "Unary", "Unary", "Add"])
      // a failing builder fails the same way each time
      const bad = Ops.add(w, yield* g.input("y", "f32", [3]))
      assert.strictEqual(yield* Effect.flip(bad), yield* Effect.flip(bad))
    }))
})
