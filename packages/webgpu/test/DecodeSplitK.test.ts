/**
 * The int8 decode form with K split over workgroups (QuantizedDecode.int8Split, int8Splits.ts), forced on
 * the adapter at hand and matched against the CPU: each split rounds and reads its part of b and of the
 * weights, a second dispatch adds the partial sums and does what the unsplit form does after them (the
 * bias, a gated product's swiglu, a stack's stores), with b made by the product (a norm, attention's merge).
 */
import { DType, type Plan, Tensor } from "@effect-gpu/core"
import { Graph, Ops, Quant } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { adapterAvailable, fusedOnBoth, nmse, offersInt8, onDeviceAndCpu, productOnBoth } from "./utils.js"

/** the decode shape with splits of at most `most` values where grids are below `below` workgroups */
const splitting = (most: number, below?: number) =>
  WebGpu.make({
    devices: 1,
    quantizedDecode: { rows: 1, columns: 1, stage: 1, int8Split: most, ...(below ? { int8SplitBelow: below } : {}) }
  })

/** seeded values for weights `w`: as they are for f32 and f16, else quantized to its blocks */
const weightsFor = (w: Tensor.Tensor, seed: number) => {
  const v = Generators.values(seed, Tensor.nelements(w))
  return DType.isQuantized(w.dtype) ? Quant.unsafeQuantize(w.dtype, v) : v
}

describe.skipIf(!adapterAvailable)("WebGPU decode split-K", () => {
  // every block type with a bias and batches broadcast (the partials of each batch apart), splits of at most
  // 1024 values: K = 2560 cut in 4 splits of 640 (the 32-value types) or 5 of 512 (the k-quants' blocks of
  // 256), K = 4096 in 4 of 1024;
  // a's rows viewed one row in (rows of 2788 bytes: off 16-byte boundaries) fall back to the unsplit f32
  // form; a grid already at the threshold stays whole
  it.scoped(
    "products split over K (splits=S) add up to the CPU's, with their bias",
    () =>
      Effect.gen(function*() {
        const [d] = yield* splitting(1024)
        if (!offersInt8(d)) return
        const [few] = yield* splitting(1024, 12)
        const cases = [
          { dtype: "q4_0", K: 2560, splits: 4, shifted: false, device: d },
          { dtype: "q8_0", K: 2560, splits: 4, shifted: false, device: d },
          { dtype: "q4_1", K: 4096, splits: 4, shifted: false, device: d },
          { dtype: "q5_0", K: 2560, splits: 4, shifted: false, device: d },
          { dtype: "q4_K", K: 2560, splits: 5, shifted: false, device: d },
          { dtype: "q6_K", K: 2560, splits: 5, shifted: false, device: d },
          { dtype: "q8_0", K: 2624, splits: undefined, shifted: true, device: d },
          { dtype: "q8_0", K: 2560, splits: undefined, shifted: false, device: few }
        ] as const
        for (const c of cases) {
          const what = JSON.stringify({ ...c, device: c.device === d ? "default" : "few" })
          const { cpu, entries, gpu } = yield* productOnBoth(c.device, {
            dtype: c.dtype,
            K: c.K,
            M: 37,
            N: 1,
            batches: [2, 4],
            shifted: c.shifted,
            bias: true,
            seed: 3
          })
          // 3 workgroups of 16 rows for each of 4 batches: 12, the threshold of `few`
          assert.strictEqual(entries[0].variant?.splits, c.splits, what)
          assert.strictEqual(entries[0].variant?.family, c.shifted ? "mvq" : "mvq8", what)
          assert.deepStrictEqual(
            entries.slice(1).map((e) => e.variant?.family),
            c.splits === undefined ? [] : ["mvq8_merge"],
            what
          )
          if (c.splits !== undefined) assert.strictEqual(entries[1].variant?.splits, c.splits, what)
          assert.isBelow(nmse(gpu, cpu), c.shifted ? 5e-5 : 1e-9, what)
        }
      }),
    120_000
  )

  // a gated FFN's products (both products' partials apart, the swiglu after their sums) and a q/k/v stack,
  // parts straddling a workgroup's rows, each with its norm made by the product (each split reads the
  // whole row for its norm); a stack storing keys and values from its merge: DecodeVariants' stores test
  it.scoped(
    "split gated products and stacks with their norms match the CPU",
    () =>
      Effect.gen(function*() {
        const [d] = yield* splitting(512)
        if (!WebGpuDevice.hasInt8Dot(d)) return
        for (const [types, ffn, splits] of [["q8_0", "q4_0", 3], ["q4_K+q4_K+q6_K", "q4_K", 3]] as const) {
          const K = 1536
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [K, 1])
          const x2 = yield* g.input("x2", "f32", [K, 1])
          const [w, w2] = yield* Effect.forEach(["w", "w2"], (n) => g.param(n, "f32", [K]))
          const parts = types.split("+") as Array<DType.DType>
          const ws = yield* Effect.forEach([40, 8, 9], (rows, i) => g.param(`w${i}`, parts[i] ?? parts[0], [K, rows]))
          const norm = Ops.mul(Ops.rmsNorm(x, 1e-5), w)
          const outs = yield* Effect.forEach(ws, (wt) => g.output(Ops.scale(Ops.mulMat(wt, norm), 1)))
          const gate = yield* g.param("gate", ffn, [K, 80])
          const up = yield* g.param("up", ffn, [K, 80])
          const norm2 = Ops.mul(Ops.rmsNorm(x2, 1e-5), w2)
          const y = yield* g.output(Ops.swiglu(Ops.mulMat(gate, norm2), Ops.mulMat(up, norm2)))
          const graph = g.build()
          const fused = (yield* d.makeBackend()).optimize(graph)
          const { cpu, entries, gpu } = yield* onDeviceAndCpu(d, fused, graph, (plan) =>
            Effect.gen(function*() {
              for (const [i, wt] of [...ws, gate, up].entries()) yield* plan.set(wt, weightsFor(wt, 20 + i))
              yield* plan.set(x, Generators.values(30, K))
              yield* plan.set(x2, Generators.values(31, K))
              yield* plan.set(w, Generators.values(32, K).map((z) => 1 + z))
              yield* plan.set(w2, Generators.values(33, K).map((z) => 1 - z))
            }), [...outs, y])
          const what = JSON.stringify({ types, ffn })
          const products = entries.filter((e) => e.op === "mul_mat_stack" || e.op === "mul_mat_swiglu")
          assert.sameDeepMembers(
            products.map((e) => [e.op, e.variant?.family, e.variant?.splits, e.variant?.norm]),
            [
              ["mul_mat_stack", "mvq8_stack", splits, true],
              ["mul_mat_stack", "mvq8_merge", splits, undefined],
              ["mul_mat_swiglu", "mvq8_swiglu", splits, true],
              ["mul_mat_swiglu", "mvq8_merge", splits, undefined]
            ],
            what
          )
          assert.isFalse(entries.some((e) => e.op === "rms_norm_mul"), what)
          assert.isBelow(nmse(gpu, cpu), 1e-6, what)
        }
      }),
    120_000
  )

  // a layer's output projection merging the split attention it reads (mergeIn.ts), with the residual added,
  // its K (8 heads of 128) in 2 splits: each split weighs every head's attention splits for its part of b
  it.scoped(
    "a split product merging the attention it reads matches the CPU",
    () =>
      Effect.gen(function*() {
        const [probe] = yield* splitting(512)
        if (!WebGpuDevice.hasInt8Dot(probe) || !probe.description.includes("subgroups")) {
          console.log(`on ${probe.description}: no int8 product or no decode attention to merge`)
          return
        }
        const [d] = yield* WebGpu.make({
          devices: 1,
          attentionDecode: { splits: 3 },
          quantizedDecode: { rows: 1, columns: 1, stage: 1, int8Split: 512 }
        })
        const [D, H, nKv] = [128, 8, 200]
        const g = Graph.make()
        const q = yield* g.input("q", "f32", [D, H, 1])
        const k = yield* g.input("k", "f16", [D, nKv, 2])
        const v = yield* g.input("v", "f16", [D, nKv, 2])
        const wo = yield* g.param("wo", "q8_0", [H * D, 96])
        const r = yield* g.input("r", "f32", [96, 1])
        const attn = Ops.flashAttnExt(Ops.permute(q, [0, 2, 1, 3]), k, v, { scale: 0.125 })
        const y = yield* g.output(Ops.add(r, Ops.mulMat(wo, Ops.reshape(attn, [H * D, 1]))))
        const graph = g.build()
        const { cpu, entries, gpu } = yield* fusedOnBoth(d, graph, (plan) =>
          Effect.gen(function*() {
            yield* plan.set(q, Generators.values(1, D * H))
            yield* plan.set(k, Generators.values(2, D * nKv * 2))
            yield* plan.set(v, Generators.values(3, D * nKv * 2))
            yield* plan.set(wo, weightsFor(wo, 5))
            yield* plan.set(r, Generators.values(6, 96))
          }), [y])
        assert.deepStrictEqual(
          entries.map((e) => [e.op, e.variant?.family, e.variant?.splits, e.variant?.merge]),
          [
            ["flash_attn_ext", entries[0].variant?.family, entries[0].variant?.splits, undefined],
            ["mul_mat_add", "mvq8", 2, `${H}x3x${D}`],
            ["mul_mat_add", "mvq8_merge", 2, undefined]
          ]
        )
        assert.isBelow(nmse(gpu, cpu), 1e-6)
      }),
    120_000
  )
  // a split product whose one reader is the residual sum's norm (norms left apart from the products): the
  // norm adds the product's partial sums itself and the merge's dispatch goes (splitsIn.ts); the sum also
  // read later, so kept beside the norm (add_rms_norm_keep); `splitsInNorms: false` keeps the merge
  it.scoped(
    "a norm adding a split product's partial sums matches the CPU",
    () =>
      Effect.gen(function*() {
        const options = { devices: 1, quantizedDecode: { rows: 1, columns: 1, stage: 1, int8Split: 512 } }
        const [d] = yield* WebGpu.make({ ...options, normsInProducts: false })
        if (!WebGpuDevice.hasInt8Dot(d)) return
        const [apart] = yield* WebGpu.make({ ...options, normsInProducts: false, splitsInNorms: false })
        const [K, M] = [1536, 96]
        for (const [dtype, keep] of [["q8_0", false], ["q4_K", true]] as const) {
          const g = Graph.make()
          const h = yield* g.input("h", "f32", [K, 1])
          const r = yield* g.input("r", "f32", [M, 1])
          const s = yield* g.input("s", "f32", [M, 1])
          const wn = yield* g.param("wn", "f32", [M])
          const w = yield* g.param("w", dtype, [K, M])
          const x = Ops.add(r, Ops.mulMat(w, h))
          const outs = [yield* g.output(Ops.mul(Ops.rmsNorm(x, 1e-5), wn))]
          if (keep) outs.push(yield* g.output(Ops.add(x, s)))
          const graph = g.build()
          const set = (plan: Plan.Plan) =>
            Effect.gen(function*() {
              yield* plan.set(w, weightsFor(w, 40))
              yield* plan.set(h, Generators.values(41, K))
              yield* plan.set(r, Generators.values(42, M))
              if (keep) yield* plan.set(s, Generators.values(43, M))
              yield* plan.set(wn, Generators.values(44, M).map((z) => 1 + z))
            })
          const folded = yield* fusedOnBoth(d, graph, set, outs)
          const merged = yield* fusedOnBoth(apart, graph, set, outs)
          const what = JSON.stringify({ dtype, keep })
          const norm = keep ? "add_rms_norm_keep" : "add_rms_norm"
          // K = 1536 in 3 splits of 512
          const splits = 3
          assert.deepStrictEqual(
            folded.entries.filter((e) => e.op !== "add").map((
              e
            ) => [e.op, e.variant?.family, e.variant?.splits ?? e.variant?.partials]),
            [["mul_mat", "mvq8", splits], [norm, "row", splits]],
            what
          )
          assert.deepStrictEqual(
            merged.entries.filter((e) => e.op !== "add").map((e) => [e.op, e.variant?.family]),
            [["mul_mat", "mvq8"], ["mul_mat", "mvq8_merge"], [norm, "row"]],
            what
          )
          assert.isBelow(nmse(folded.gpu, folded.cpu), 1e-6, what)
          assert.isBelow(nmse(merged.gpu, merged.cpu), 1e-6, what)
        }
      }),
    120_000
  )
})
