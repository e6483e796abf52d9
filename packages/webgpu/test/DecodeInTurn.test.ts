/**
 * The int8 decode form's workgroups over more rows than a group of 16, forced on the adapter at hand and
 * matched against the CPU: fewer workgroups than row groups (QuantizedDecode.int8Groups, the default on GPUs
 * past 396), each rounding b once and taking its groups in turn, and workgroups of 16 subgroups
 * (int8Warps). Stacks and products making their norm in turn are in DecodeVariants.test.ts.
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

  // workgroups of 16 subgroups (int8Warps: 32 rows a group), alone and taking their groups in turn: plain
  // products with a bias, a gated FFN, a q/k/v stack of parts straddling the groups and a norm made in it
  it.scoped(
    "the int8 form's workgroups of 16 subgroups (int8Warps) match the CPU",
    () =>
      Effect.gen(function*() {
        const wide = yield* int8Device({ int8Warps: 16 })
        if (!offersInt8(wide)) return
        const wideTurns = yield* int8Device({ int8Warps: 16, int8Groups: 2 })
        // [device, weights, K, rows of q (k and v take 24 each; 0: a plain product of 70 rows), gated]
        const cases = [
          [wide, "q8_0", 2560, 0, false],
          [wideTurns, "q4_K", 512, 0, true],
          [wide, "q4_0", 640, 40, false],
          [wideTurns, "q8_0", 1536, 72, false]
        ] as const
        for (const [on, dtype, K, qRows, gated] of cases) {
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [K, 1])
          const w = yield* g.param("w", "f32", [K])
          const c = yield* g.param("c", "f32", [70])
          const normed = Ops.mul(Ops.rmsNorm(x, 1e-5), w)
          const rows = qRows > 0 ? [qRows, 24, 24] : gated ? [70, 70] : [70]
          const ws = yield* Effect.forEach(rows, (m, i) => g.param(`w${i}`, dtype, [K, m]))
          const ys = yield* Effect.forEach(ws, (wt) => Ops.mulMat(wt, qRows > 0 ? normed : x))
          const outs = qRows > 0
            ? yield* Effect.forEach(ys, (y) => g.output(Ops.scale(y, 1)))
            : [yield* g.output(gated ? Ops.swiglu(ys[0], ys[1]) : Ops.add(ys[0], c))]
          const graph = g.build()
          const backend = yield* on.makeBackend()
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(on, backend.optimize(graph), graph, (plan) =>
            Effect.gen(function*() {
              for (const [i, wt] of ws.entries()) {
                yield* plan.set(wt, Quant.unsafeQuantize(dtype, Generators.values(20 + i, K * wt.ne[1])))
              }
              yield* plan.set(x, Generators.values(30, K))
              if (qRows > 0) {
                yield* plan.set(
                  w,
                  Generators.values(31, K).map((z) =>
                    1 + z
                  )
                )
              }
              if (qRows === 0 && !gated) {
                yield* plan.set(c, Generators.values(32, 70))
              }
            }), outs)
          const what = `${dtype} K ${K} q ${qRows} gated ${gated}`
          const product = entries.find((e) =>
            String(e.variant?.family).startsWith("mvq8")
          )
          assert.strictEqual(
            product?.variant?.family,
            qRows > 0 ? "mvq8_stack" : gated ? "mvq8_swiglu" : "mvq8",
            what
          )
          assert.strictEqual(product?.variant?.int8Warps, 16, what)
          assert.strictEqual(product?.variant?.inTurn, on === wideTurns ? 2 : undefined, what)
          if (qRows > 0) {
            assert.strictEqual(product?.variant?.norm, true, what)
          }
          // the norm made in the product rounds b as the CPU's norm then its rounding do: a flip at most
          assert.isBelow(nmse(gpu, cpu), qRows > 0 ? 1e-6 : 1e-9, what)
        }
      }),
    120_000
  )
})
