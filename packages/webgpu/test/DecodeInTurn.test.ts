/**
 * The int8 decode form's workgroups over more rows than a group of 16, forced on the adapter at hand and
 * matched against the CPU: fewer workgroups than row groups (QuantizedDecode.int8Groups, the default on GPUs
 * past 396), each rounding b once and taking its groups in turn. Stacks and products making their norm in
 * turn are in DecodeVariants.test.ts.
 */
import { Fusion, Graph, Ops, Quant } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { adapterAvailable, int8Device, nmse, offersInt8, onDeviceAndCpu } from "./utils.js"

describe.skipIf(!adapterAvailable)("WebGPU decode row groups in turn", () => {
  // the int8 form with fewer workgroups than row groups (int8Groups), each taking groups in turn over its one
  // rounding of b: plain products of odd rows with a bias (q8_0, q4_K), a gated FFN (q4_0); groups not
  // taken so where there are no more of them than workgroups, or b has batches
  it.scoped(
    "the int8 form's workgroups taking row groups in turn (inTurn) match the CPU",
    () =>
      Effect.gen(function*() {
        const d = yield* int8Device({ int8Groups: 2 })
        if (!offersInt8(d)) return
        // [weights, K, rows, b's batches, gated, workgroups in turn]
        const cases = [
          ["q8_0", 2560, 70, 1, false, 2],
          ["q4_K", 512, 37, 1, false, 2],
          ["q4_0", 640, 37, 1, true, 2],
          ["q8_0", 640, 30, 1, false, undefined],
          ["q8_0", 640, 70, 3, false, undefined]
        ] as const
        for (const [dtype, K, M, batches, gated, turns] of cases) {
          const g = Graph.make()
          const a = yield* g.param("a", dtype, [K, M])
          const u = yield* g.param("u", dtype, [K, M])
          const b = yield* g.input("b", "f32", [K, 1, batches])
          const c = yield* g.param("c", "f32", [M, 1, batches])
          const y = yield* g.output(
            gated ? Ops.swiglu(Ops.mulMat(a, b), Ops.mulMat(u, b)) : Ops.add(Ops.mulMat(a, b), c)
          )
          const graph = g.build()
          const fused = Fusion.optimize(graph, { mulMatSwiglu: () => true })
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, fused, graph, (plan) =>
            Effect.gen(function*() {
              yield* plan.set(a, Quant.unsafeQuantize(dtype, Generators.values(3, K * M)))
              if (gated) yield* plan.set(u, Quant.unsafeQuantize(dtype, Generators.values(4, K * M)))
              else yield* plan.set(c, Generators.values(6, M * batches))
              yield* plan.set(b, Generators.values(5, K * batches))
            }), [y])
          const what = `${dtype} K ${K} M ${M} batches ${batches}`
          const product = entries.find((e) => String(e.variant?.family).startsWith("mvq8"))
          assert.strictEqual(product?.variant?.family, gated ? "mvq8_swiglu" : "mvq8", what)
          assert.strictEqual(product?.variant?.inTurn, turns, what)
          assert.isBelow(nmse(gpu, cpu), 1e-9, what)
        }
      }),
    120_000
  )
})
