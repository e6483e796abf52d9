import { Cpu, Graph, Ops, Registry } from "@effect-gpu/core"
import { Compare, Generators, TestGpu } from "@effect-gpu/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"

describe("Generators", () => {
  it("are deterministic in their seed and never zero", () => {
    const a = Generators.values(7, 1000)
    assert.deepStrictEqual(a, Generators.values(7, 1000))
    assert.notDeepEqual(a, Generators.values(8, 1000))
    assert.isTrue(a.every((v) => Math.abs(v) >= 0.05 && Math.abs(v) <= 1))
    assert.isTrue(Generators.values(3, 100, { positive: true }).every((v) => v > 0))
    const data = fc.sample(Generators.tensorData(64, { positive: true }), { seed: 5, numRuns: 3 })
    assert.deepStrictEqual(data, fc.sample(Generators.tensorData(64, { positive: true }), { seed: 5, numRuns: 3 }))
    assert.isTrue(data.every((d) => d.length === 64 && d.every((v) => v > 0)))
    const idx = Generators.indices(1, 500, 9)
    assert.isTrue(idx.every((i) => i >= 0 && i < 9))
  })

  it.effect.prop(
    "random shapes: a broadcast add and a softmax on the mock match the CPU",
    [Generators.shape({ maxElements: 2048 }), fc.integer({ min: 0, max: 1e6 })],
    ([[n0, n1, n2, n3], seed]) =>
      Effect.gen(function*() {
        const outputs: Array<ArrayLike<number>> = []
        for (const name of ["Test0", "CPU"]) {
          const device = yield* Registry.deviceByName(name)
          const backend = yield* device.makeBackend()
          const g = Graph.make()
          const a = yield* g.input("a", "f32", [n0, n1, n2, n3])
          const b = yield* g.input("b", "f32", [n0, 1, n2, 1])
          const y = yield* g.output(Ops.softMax(Ops.add(a, b)))
          const plan = yield* backend.allocate(g)
          yield* plan.set(a, Generators.values(seed, n0 * n1 * n2 * n3))
          yield* plan.set(b, Generators.values(seed + 1, n0 * n2))
          yield* backend.compute(plan)
          outputs.push(yield* plan.get(y))
        }
        assert.strictEqual(Compare.nmse(outputs[0], outputs[1]), 0)
      }).pipe(Effect.scoped, Effect.provide(TestGpu.layer()), Effect.provide(Cpu.layer())),
    { fastCheck: { numRuns: 20 } }
  )
})
