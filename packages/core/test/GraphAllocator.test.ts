import type { Tensor } from "@effect-gpu/core"
import { Cpu, Graph, GraphAllocator, Ops, Registry } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { random } from "./utils.js"

/** Each owning tensor lives from its creation to its last use (for ever if an output or input). */
const lifetimes = (graph: Graph.Graph, plan: GraphAllocator.Plan) => {
  const order = new Map<number, number>()
  graph.leafs.forEach((t) => order.set(t.id, -1))
  graph.nodes.forEach((t, i) => order.set(t.id, i))
  const end = new Map<number, number>()
  const owner = (t: Tensor.Tensor): Tensor.Tensor => t.viewSrc ?? t
  const touch = (t: Tensor.Tensor, i: number) => {
    const o = owner(t)
    end.set(o.id, Math.max(end.get(o.id) ?? -1, i))
  }
  graph.leafs.forEach((t) => touch(t, Infinity))
  graph.outputs.forEach((t) => touch(t, Infinity))
  graph.nodes.forEach((n, i) => {
    touch(n, i)
    n.src.forEach((s) => touch(s, i))
  })
  // an in-place node extends its parent's life through its own
  const intervals: Array<{ id: number; start: number; end: number; offset: number; size: number }> = []
  for (const [id, offset] of plan.offsets) {
    if ([...plan.inPlace.values()].includes(id)) continue
    let last = end.get(id)!
    let cur = id
    for (;;) {
      const next = [...plan.inPlace.entries()].find(([, parent]) => parent === cur)
      if (!next) break
      cur = next[0]
      last = Math.max(last, end.get(cur)!)
    }
    intervals.push({ id, start: order.get(id)!, end: last, offset, size: plan.sizes.get(id)! })
  }
  return intervals
}

const randomGraph = (seed: number, n: number) =>
  Effect.gen(function*() {
    const rnd = random(seed)
    const pick = () => Math.abs(rnd(1)[0])
    const g = Graph.make()
    const pool: Array<Tensor.Tensor> = [yield* g.input("x", "f32", [16, 4]), yield* g.input("y", "f32", [16, 4])]
    for (let i = 0; i < n; i++) {
      const a = pool[Math.floor(pick() * pool.length)]
      const b = pool[Math.floor(pick() * pool.length)]
      const k = Math.floor(pick() * 4)
      pool.push(
        yield* (k === 0 ? Ops.add(a, b) : k === 1 ? Ops.mul(a, b) : k === 2 ? Ops.silu(a) : Ops.softMax(a))
      )
    }
    yield* g.output(pool[pool.length - 1])
    yield* g.output(pool[pool.length - 2])
    return g.build()
  })

describe("GraphAllocator", () => {
  it.effect("reuses memory: a long chain needs far less than the sum of its tensors", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      let t = yield* g.input("x", "f32", [256])
      for (let i = 0; i < 50; i++) t = yield* Ops.cumsum(Ops.exp(t))
      yield* g.output(t)
      const plan = GraphAllocator.plan(g.build(), { alignment: 32 })
      assert.isBelow(plan.size, plan.naiveSize / 10)
      assert.isAbove(plan.inPlace.size, 0)
    }))

  it.effect("element-wise ops take over a dying source of the same layout", () =>
    Effect.gen(function*() {
      const g = Graph.make()
      const x = yield* g.input("x", "f32", [64])
      const a = yield* Ops.exp(x)
      const b = yield* Ops.scale(a, 2)
      const c = yield* Ops.sqr(b)
      yield* g.output(Ops.cumsum(c))
      const plan = GraphAllocator.plan(g.build(), { alignment: 32 })
      assert.strictEqual(plan.inPlace.get(b.id), a.id)
      assert.strictEqual(plan.inPlace.get(c.id), b.id)
      assert.isFalse(plan.inPlace.has(a.id), "inputs are kept: exp must not overwrite x")
    }))

  it.effect.prop(
    "no two live tensors overlap",
    [fc.integer(), fc.integer({ min: 5, max: 60 })],
    ([seed, n]) =>
      Effect.gen(function*() {
        const graph = yield* randomGraph(seed, n)
        const plan = GraphAllocator.plan(graph, { alignment: 64 })
        const live = lifetimes(graph, plan)
        for (const p of live) assert.strictEqual(p.offset % 64, 0)
        for (let i = 0; i < live.length; i++) {
          for (let j = i + 1; j < live.length; j++) {
            const [p, q] = [live[i], live[j]]
            const timeOverlap = p.start <= q.end && q.start <= p.end
            const memOverlap = p.offset < q.offset + q.size && q.offset < p.offset + p.size
            assert.isFalse(timeOverlap && memOverlap, `tensors ${p.id} and ${q.id} overlap while both live`)
          }
        }
        assert.isAtMost(plan.size, plan.naiveSize)
      }),
    { fastCheck: { numRuns: 40 } }
  )

  it.scoped("a reused plan still computes the same values as without reuse", () =>
    Effect.gen(function*() {
      const graph = yield* randomGraph(7, 40)
      const backend = yield* (yield* Registry.bestDevice).makeBackend()
      const plan = yield* backend.allocate(graph)
      const x = random(1)(64)
      const y = random(2)(64)
      yield* plan.set(graph.leafs[0], x)
      yield* plan.set(graph.leafs[1], y)
      yield* backend.compute(plan)
      const first = yield* plan.get(graph.outputs[0])
      // recompute: inputs are pinned, so the same plan gives the same result
      yield* backend.compute(plan)
      assert.deepStrictEqual(yield* plan.get(graph.outputs[0]), first)
      // the same graph, every tensor an output: nothing is reused
      const flat = Graph.fromOutputs(graph.nodes)
      const big = yield* backend.allocate(flat)
      yield* big.set(graph.leafs[0], x)
      yield* big.set(graph.leafs[1], y)
      yield* backend.compute(big)
      assert.deepStrictEqual(yield* big.get(graph.outputs[0]), first)
      assert.isBelow(plan.layout.size, big.layout.size)
    }).pipe(Effect.provide(Cpu.layer())))
})
