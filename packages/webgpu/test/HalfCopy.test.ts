/**
 * A quantized prompt product's weights copied into f16 first (half_copy into the scratch after the result,
 * then the f16 product over the copy): every form of the copy against the CPU, and the copy's values exact.
 */
import { Float16, Graph, Ops, Quant } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { adapterAvailable, nmse, productOnBoth } from "./utils.js"

/** a form of the copy: how it loads its runs, its vec4s a thread and its stores' width */
type CopyForm = readonly ["copy" | "tiles", "words" | "vec4" | "ahead", WebGpu.Options["copyShape"]]

describe.skipIf(!adapterAvailable)("WebGPU f16 copy of quantized weights", () => {
  // forced on any adapter with f16, for 32-value block types and the 256-value ones; a contiguous a copied as
  // one run of blocks across its rows (runs that start and end within rows), and a's batches a row apart (row
  // by row), broadcast over b's; rows of more than one workgroup's run (2080 q8_0 values, 8448 q4_K and q6_K
  // values) with a short last run, q8_0 rows of 2210 bytes and q6_K rows of 6930 (every other one starting at
  // a 2-byte boundary), a view of a a row in (the copy's scalar stores), a bias; the copy's runs staged a word
  // a load, 16 bytes a load and a word a load with the loads ahead of the stores (runs from 2-byte and 16-byte
  // boundaries alike, q4_0 and q8_0 only), runs of 256 and 512 blocks stored 16 bytes a store; forced off,
  // the tiles take it
  it.scoped(
    "a quantized product over an f16 copy of its weights (half_copy, then the f16 product) matches the CPU",
    () =>
      Effect.gen(function*() {
        const forms: ReadonlyArray<CopyForm> = [
          ["copy", "words", undefined],
          ["copy", "vec4", undefined],
          ["copy", "ahead", undefined],
          ["copy", "ahead", { vecs: 16, stores: "wide" }],
          ["copy", "vec4", { vecs: 8, stores: "wide" }],
          ["copy", "words", { vecs: 8 }],
          ["tiles", "words", undefined]
        ]
        for (const [form, loads, shape] of forms) {
          const [d] = yield* WebGpu.make({
            devices: 1,
            quantizedPrefill: form,
            copyLoads: loads,
            ...(shape ? { copyShape: shape } : {})
          })
          if (!d.description.includes("shader-f16")) return console.log("no shader-f16 here: no f16 copy")
          for (
            const [dtype, K, M, N, shifted, withBias, batches] of [
              ["q4_0", 96, 37, 19, false, true, [2, 4]],
              ["q4_0", 96, 150, 19, false, false, [1, 2]],
              ["q8_0", 2080, 50, 33, true, false, [2, 4]],
              ["q8_0", 2080, 50, 33, true, false, [1, 1]],
              ["q4_K", 8448, 21, 12, false, false, [2, 4]],
              ["q6_K", 8448, 21, 12, false, false, [1, 2]],
              ["q5_0", 96, 37, 19, false, false, [1, 2]]
            ] as const
          ) {
            const spec = { dtype, K, M, N, batches, shifted, bias: withBias, seed: 1 } as const
            const { cpu, entries, gpu } = yield* productOnBoth(d, spec)
            const what = `${form} ${loads} ${JSON.stringify(shape)} ${dtype}: ${
              entries.map((e) => e.kernel).join(", ")
            }`
            const v = entries[0].variant
            assert.strictEqual(v?.family === "half_copy", form === "copy", what)
            if (form === "copy") {
              assert.isAbove(entries.length, 1, what)
              // a's view a row in starts off a 16-byte boundary: the copy's one-value-at-a-time form
              assert.strictEqual(v?.vec, !shifted, what)
              // q4_0, q8_0 and the k-quants staged, a vec4 a thread; other types a 32-value piece a thread
              assert.strictEqual(v?.lanes, dtype !== "q5_0", what)
              // staged 16 bytes a load where asked, for q4_0 and q8_0 where a's binding allows it
              const raw = dtype === "q4_0" || dtype === "q8_0"
              // a word a load, all of a thread's issued before its stores, unless asked for `words` (any
              // offset; the vec4 form falls back to it)
              assert.strictEqual(
                v?.loads,
                !raw ? undefined : loads === "vec4" && !shifted ? "vec4" : loads === "words" ? undefined : "ahead",
                what
              )
              // the run's size and the 16-byte stores (q4_0 and q8_0; not where the copy stores a value at a time)
              assert.strictEqual(v?.vecs, raw && shape?.vecs !== undefined ? shape.vecs : undefined, what)
              assert.strictEqual(v?.stores, raw && !shifted && shape?.stores === "wide" ? "wide" : undefined, what)
            }
            assert.isBelow(nmse(gpu, cpu), 1e-4, `${form} ${dtype} ${K}x${M}x${N}`)
          }
        }
      }),
    180_000
  )

  // the copy decodes q8_0 and q4_0 quants straight into f16 (HALF_QUANTS: bits in 1024.0h's mantissa): its
  // values are the blocks' values rounded to f16, exactly; read through a product with the identity (one term
  // a result, times 1), each result is one copied weight
  it.scoped("the f16 copy of q8_0 and q4_0 weights is their values rounded to f16, exactly", () =>
    Effect.gen(function*() {
      const [d] = yield* WebGpu.make({ devices: 1, quantizedPrefill: "copy" })
      if (!d.description.includes("shader-f16")) return console.log("no shader-f16 here: no f16 copy")
      const forms: ReadonlyArray<readonly ["q8_0" | "q4_0", "words" | "vec4" | "ahead", WebGpu.Options["copyShape"]]> =
        [
          ["q8_0", "ahead", undefined],
          ["q4_0", "ahead", undefined],
          ["q8_0", "vec4", undefined],
          ["q4_0", "words", undefined],
          ["q8_0", "ahead", { vecs: 16, stores: "wide" }],
          ["q4_0", "ahead", { vecs: 8, stores: "wide" }]
        ]
      for (const [dtype, loads, shape] of forms) {
        const [K, M] = [256, 40]
        // the default stages a thread's words all loaded first (ahead)
        const [on] = loads !== "ahead" || shape !== undefined
          ? yield* WebGpu.make({
            devices: 1,
            quantizedPrefill: "copy",
            copyLoads: loads,
            ...(shape ? { copyShape: shape } : {})
          })
          : [d]
        const g = Graph.make()
        const a = yield* g.param("a", dtype, [K, M])
        const eye = yield* g.input("eye", "f32", [K, K])
        const y = yield* g.output(Ops.mulMat(a, eye))
        const backend = yield* on.makeBackend()
        const plan = yield* backend.allocate(backend.optimize(g.build()))
        const blocks = Quant.unsafeQuantize(dtype, Generators.values(3, K * M))
        yield* plan.set(a, blocks)
        yield* plan.set(eye, Float32Array.from({ length: K * K }, (_, i) => (i % (K + 1) === 0 ? 1 : 0)))
        const trace = yield* backend.captureNext
        yield* backend.compute(plan)
        const entries = (yield* trace).entries
        assert.isTrue(entries[0].kernel.startsWith("half_copy"), entries.map((e) => e.kernel).join(", "))
        assert.strictEqual(entries[0].variant?.stores, shape?.stores, entries[0].kernel)
        const got = yield* plan.get(y)
        const values = yield* Quant.dequantize(dtype, blocks)
        const off = Array.from({ length: K * M }, (_, i) => i).filter((i) =>
          got[(i % K) * M + Math.floor(i / K)] !== Float16.round(values[i])
        )
        assert.deepStrictEqual(
          off.slice(0, 8),
          [],
          `${dtype} ${loads} ${JSON.stringify(shape)}: ${off.length} values off`
        )
      }
    }))
})
