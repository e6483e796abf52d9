/**
 * A split-K product's partial sums added by the norm dispatched right after its merge (splitsIn.ts), for a
 * prompt's shapes on subgroup matrices, which lavapipe lacks: the pass over the prepared dispatches as the
 * program runs it, without a device (the values on a GPU: bench/probes/kernel-check.ts, section `sums`;
 * the same pass on lavapipe through the int8 decode form's splits: DecodeSplitK.test.ts).
 */
import { Fusion, Graph, Ops, Tensor } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Kernel } from "../src/internal/kernels/kernel.js"
import { kernelFor } from "../src/internal/kernels/select.js"
import { foldIntoNorms } from "../src/internal/splitsIn.js"
import { matrixGpu as gpu } from "./utils.js"

/**
 * a 1B layer's output projection (2048 x 2048 over 512 tokens: K split 4 ways) and the residual sum and
 * norm after it, the sum read again after the norm (stored over the stream: add_rms_norm_store), fused;
 * the prepared dispatches as the program lists them: the product, its merge, the norm
 */
const layer = Effect.gen(function*() {
  const g = Graph.make()
  const x0 = yield* g.input("x0", "f32", [2048, 512])
  const h = yield* g.input("h", "f32", [2048, 512])
  const w = yield* g.param("w", "f16", [2048, 2048])
  const wn = yield* g.param("wn", "f32", [2048])
  const x = Ops.add(Ops.scale(x0, 0.5), Ops.mulMat(w, h))
  yield* g.output(Ops.add(x, Ops.mul(Ops.rmsNorm(x, 1e-5), wn)))
  const fused = Fusion.optimize(g.build(), { addRmsNormStore: true })
  const product = fused.nodes.find((n) => n.op._tag === "MulMat")!
  const norm = fused.nodes.find((n) => n.op._tag === "AddRmsNormStore")!
  const kernel = kernelFor(product, gpu)!
  const list = [
    { node: product, kernel },
    { node: product, kernel: kernel.next! },
    { node: norm, kernel: kernelFor(norm, gpu)! }
  ]
  return { fused, product, norm, list }
})

const prepared = (node: Tensor.Tensor, kernel: Kernel) => ({ node, kernel })

describe("split-K partial sums added by the norm after them", () => {
  it.effect("a prompt's norm takes its product's partials, and the merge's dispatch goes", () =>
    Effect.gen(function*() {
      const { fused, list, norm, product } = yield* layer
      assert.strictEqual(list[0].kernel.variant.splits, 4)
      assert.deepStrictEqual(list[1].kernel.sums, { splits: 4, count: 2048 * 512 })
      const users = Graph.users(fused)
      const folded = foldIntoNorms(list, gpu, (t) => users.get(t.id) ?? 0, () => false, prepared)
      assert.deepStrictEqual(folded.map((p) => p.kernel.variant.family), ["mmsg", "row"])
      assert.strictEqual(folded[1].node, norm)
      assert.deepInclude(folded[1].kernel.variant, { op: "rms_norm", store: true, partials: 4 })
      // b bound over the product and its four sets of partials, read at the scratch after the result
      const b = folded[1].kernel.operands.find((o) => o.name === "b")!
      assert.strictEqual(b.tensor, product)
      assert.strictEqual(b.extent, Tensor.nbytes(product) + 4 * 4 * 2048 * 512)
      assert.include(folded[1].kernel.main, `P.scratch + ${3 * 2048 * 512}u`)
      assert.deepInclude(folded[1].kernel.params.map((p) => [p.field.name, p.value]), [
        "scratch",
        Tensor.nbytes(product) / 4
      ])
    }))

  it.effect("the merge stays where the product has another reader, is an output, or the target says no", () =>
    Effect.gen(function*() {
      const { list } = yield* layer
      const families = (folded: ReadonlyArray<{ readonly kernel: Kernel }>) =>
        folded.map((p) => String(p.kernel.variant.family))
      const kept = ["mmsg", "mmsg_merge", "row"]
      assert.deepStrictEqual(families(foldIntoNorms(list, gpu, () => 2, () => false, prepared)), kept)
      assert.deepStrictEqual(families(foldIntoNorms(list, gpu, () => 1, () => true, prepared)), kept)
      const no = { ...gpu, splitsInNorms: false }
      assert.deepStrictEqual(families(foldIntoNorms(list, no, () => 1, () => false, prepared)), kept)
      // a norm that cannot bind the partials keeps its own form and the merge
      const refusing = () => {
        throw new Error("does not bind")
      }
      assert.deepStrictEqual(families(foldIntoNorms(list, gpu, () => 1, () => false, refusing)), kept)
      // nothing after the merge to take it
      assert.deepStrictEqual(families(foldIntoNorms(list.slice(0, 2), gpu, () => 1, () => false, prepared)), [
        "mmsg",
        "mmsg_merge"
      ])
    }))
})
