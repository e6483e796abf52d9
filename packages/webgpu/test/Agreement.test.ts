/**
 * A property: random small graphs over the op set, on random shapes (empty and broadcast ones
 * included), computed on the CPU, the TestGpu mock and WebGPU agree within an NMSE bound, or all fail
 * with the same typed error. Seeded and bounded in time.
 */
import type { Backend, GpuError, Tensor } from "@effect-gpu/core"
import { Cpu, Graph, Ops } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import * as TestGpu from "@effect-gpu/testing/TestGpu"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import * as fc from "fast-check"
import { adapterAvailable } from "./utils.js"

type Build = (ts: ReadonlyArray<Tensor.Tensor>, p: number) => Effect.Effect<Tensor.Tensor, GpuError.ShapeError>

/** the op set: [name, operands, how it is built from them and a parameter in [0, 1)] */
const OPS: ReadonlyArray<readonly [string, 1 | 2, Build]> = [
  ["add", 2, ([a, b]) => Ops.add(a, b)],
  ["sub", 2, ([a, b]) => Ops.sub(a, b)],
  ["mul", 2, ([a, b]) => Ops.mul(a, b)],
  ["div", 2, ([a, b]) => Ops.div(a, b)],
  ["scale", 1, ([a], p) => Ops.scale(a, 2 * p - 1)],
  ["sqr", 1, ([a]) => Ops.sqr(a)],
  ["sqrt", 1, ([a]) => Ops.sqrt(Ops.abs(a))],
  ["exp", 1, ([a]) => Ops.exp(a)],
  ["log", 1, ([a]) => Ops.log(Ops.abs(a))],
  ["clamp", 1, ([a], p) => Ops.clamp(a, -p, p)],
  ["relu", 1, ([a]) => Ops.relu(a)],
  ["gelu", 1, ([a]) => Ops.gelu(a)],
  ["silu", 1, ([a]) => Ops.silu(a)],
  ["tanh", 1, ([a]) => Ops.tanh(a)],
  ["sigmoid", 1, ([a]) => Ops.sigmoid(a)],
  ["neg", 1, ([a]) => Ops.neg(a)],
  ["mul_mat", 2, ([a, b]) => Ops.mulMat(a, b)],
  ["soft_max", 1, ([a], p) => Ops.softMax(a, { scale: 0.5 + p })],
  ["soft_max_mask", 2, ([a, m]) => Ops.softMax(a, { mask: m })],
  ["rms_norm", 1, ([a]) => Ops.rmsNorm(a, 1e-5)],
  ["norm", 1, ([a]) => Ops.normalize(a, 1e-5)],
  ["sum_rows", 1, ([a]) => Ops.sumRows(a)],
  ["mean", 1, ([a]) => Ops.mean(a)],
  ["sum", 1, ([a]) => Ops.sum(a)],
  ["cumsum", 1, ([a]) => Ops.cumsum(a)],
  ["concat", 2, ([a, b], p) => Ops.concat(a, b, Math.floor(p * 4))],
  ["pad", 1, ([a], p) => Ops.pad(a, [Math.floor(p * 3), 1, 0, 0])],
  ["repeat", 2, ([a, b]) => Ops.repeat(a, b)],
  ["diag_mask_inf", 1, ([a], p) => Ops.diagMaskInf(a, Math.floor(p * 3))],
  ["glu", 1, ([a], p) => Ops.glu(a, p < 0.5 ? "swiglu" : "geglu")],
  ["transpose", 1, ([a]) => Ops.cont(Ops.transpose(a))],
  ["permute", 1, ([a]) => Ops.cont(Ops.permute(a, [2, 0, 1, 3]))],
  ["f16 round trip", 1, ([a]) => Ops.cpy(Ops.cpy(a, "f16"), "f32")],
  ["argmax", 1, ([a]) => Ops.cpy(Ops.argmax(a), "i32")]
]

interface Recipe {
  readonly inputs: ReadonlyArray<ReadonlyArray<number>>
  readonly steps: ReadonlyArray<{ readonly op: number; readonly a: number; readonly b: number; readonly p: number }>
  readonly seed: number
}

/** 1 to 3 inputs of up to 4 dimensions (0 to 6 long, 1 often: broadcasts), then 1 to 5 ops over any tensor */
const recipe: fc.Arbitrary<Recipe> = fc.record({
  inputs: fc.array(
    fc.array(fc.oneof(fc.constant(1), fc.integer({ min: 0, max: 6 })), { minLength: 1, maxLength: 4 }),
    { minLength: 1, maxLength: 3 }
  ),
  steps: fc.array(
    fc.record({
      op: fc.integer({ min: 0, max: OPS.length - 1 }),
      a: fc.nat(),
      b: fc.nat(),
      p: fc.double({ min: 0, max: 0.999, noNaN: true })
    }),
    { minLength: 1, maxLength: 5 }
  ),
  seed: fc.integer({ min: 1, max: 1 << 20 })
})

/** the recipe's graph (its last tensor the output), or the ShapeError an op's rules gave */
const build = (r: Recipe) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const ts: Array<Tensor.Tensor> = []
    for (const [i, ne] of r.inputs.entries()) ts.push(yield* g.input(`in${i}`, "f32", ne))
    const inputs = [...ts]
    for (const s of r.steps) {
      const [, arity, f] = OPS[s.op]
      const operands = arity === 1 ? [ts[s.a % ts.length]] : [ts[s.a % ts.length], ts[s.b % ts.length]]
      ts.push(yield* f(operands, s.p))
    }
    const y = yield* g.output(ts[ts.length - 1])
    return { graph: g.build(), inputs, y }
  })

/** the output on one backend, or the tag of the typed error it failed with */
const run = (backend: Backend.Backend, r: Recipe) =>
  Effect.scoped(Effect.gen(function*() {
    const { graph, inputs, y } = yield* build(r)
    const plan = yield* backend.allocate(graph)
    for (const [i, t] of inputs.entries()) {
      const n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]
      yield* plan.set(t, Generators.values(r.seed + i, n, { min: 0.05, max: 1 }))
    }
    yield* backend.compute(plan)
    return Array.from(yield* plan.get(y))
  })).pipe(Effect.exit)

/** agreement of two outputs: NaN where the other is NaN, the same infinities, NMSE below `bound` elsewhere */
const agree = (ours: ReadonlyArray<number>, ref: ReadonlyArray<number>, bound: number) => {
  if (ours.length !== ref.length) return `length ${ours.length} != ${ref.length}`
  let num = 0
  let den = 0
  for (let i = 0; i < ref.length; i++) {
    const [x, y] = [ours[i], ref[i]]
    if (Number.isNaN(y) || !Number.isFinite(y)) {
      if (!Object.is(x, y) && !(Number.isNaN(x) && Number.isNaN(y))) return `element ${i}: ${x} against ${y}`
      continue
    }
    num += (x - y) ** 2
    den += y * y
  }
  const e = den === 0 ? num : num / den
  return e <= bound ? undefined : `nmse ${e}`
}

/** what a run gave: "ok", or the tag of the typed error (or of the defect) it ended with */
const outcome = (e: Exit.Exit<Array<number>, { readonly _tag: string }>) =>
  Exit.isSuccess(e) ? "ok" : Option.match(Cause.failureOption(e.cause), {
    onNone: () => `defect: ${Cause.pretty(e.cause)}`,
    onSome: (error) => error._tag
  })

describe.skipIf(!adapterAvailable)("the CPU, TestGpu and WebGPU agree on random graphs", () => {
  it.live("every op over random shapes: the same numbers, or the same typed error", () =>
    Effect.gen(function*() {
      const cpu = yield* Cpu.make().makeBackend()
      const [webgpu] = yield* WebGpu.make({ devices: 1 })
      const gpu = yield* webgpu.makeBackend()
      const mockLayer = yield* Layer.build(TestGpu.layer())
      const [mockDevice] = yield* Effect.provide(Effect.flatMap(TestGpu.TestGpu, (t) => t.devices), mockLayer)
      const mock = yield* mockDevice.makeBackend()
      let built = 0
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(recipe, async (r) => {
            const exits = await Effect.runPromise(Effect.all([run(cpu, r), run(mock, r), run(gpu, r)]))
            const tags = exits.map(outcome)
            const [reference, ...others] = exits
            if (Exit.isFailure(reference)) {
              assert.deepStrictEqual(tags, [tags[0], tags[0], tags[0]], JSON.stringify(r))
              return
            }
            built++
            assert.deepStrictEqual(tags, ["ok", "ok", "ok"], JSON.stringify(r))
            for (const e of others) {
              const problem = agree(Exit.isSuccess(e) ? e.value : [], reference.value, 1e-5)
              assert.isUndefined(problem, `${problem}: ${JSON.stringify(r)}`)
            }
          }),
          { seed: 17, numRuns: 300, interruptAfterTimeLimit: 60_000 }
        )
      )
      // most recipes must build: the property says little about graphs that never run
      assert.isAbove(built, 50)
    }).pipe(Effect.scoped), 120_000)
})
