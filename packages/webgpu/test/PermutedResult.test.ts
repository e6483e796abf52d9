/**
 * mul_mat_permuted on WebGPU (permutedResult.ts; attention's chain: V·P into [D, heads, tokens]): the
 * product's kernel stores its result permuted, one dispatch where the product and the copy were two,
 * against the CPU and the two dispatches; refused where the product has another reader or the permutation
 * moves its rows, and where no form of the product's kernel keeps its result scratch-free.
 */
import { Fusion, Graph, Ops } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as PermutedResult from "../src/internal/kernels/permutedResult.js"
import { kernelFor } from "../src/internal/kernels/select.js"
import { adapterAvailable, fusedOnBoth, matrixGpu, nmse } from "./utils.js"

/** cont(permute(a·b)) for a [K, M, aBatches] and b [K, N, batches], and the product itself where `alsoRead` */
const permutedProduct = (
  p: {
    readonly K: number
    readonly M: number
    readonly N: number
    readonly batches: readonly [number, number]
    readonly axes: readonly [number, number, number, number]
    readonly alsoRead?: boolean
  }
) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const a = yield* g.param("a", "f16", [p.K, p.M, p.batches[0]])
    const b = yield* g.input("b", "f32", [p.K, p.N, p.batches[1]])
    const product = yield* Ops.mulMat(a, b)
    const y = yield* g.output(Ops.cont(Ops.permute(product, p.axes)))
    const also = p.alsoRead === true ? yield* g.output(Ops.scale(product, 2)) : undefined
    return { graph: g.build(), a, b, y, also }
  })

describe("a product's kernel storing its result permuted (no adapter needed)", () => {
  // subgroup matrices (lavapipe has none): V·P of a 1B prompt keeps its form, its result bound where the node
  // lies at the permuted strides; rows of 38 in 3 heads (strides of 114 values) give way to a form binding
  // values one at a time; a split-K form (its partials after the result, a merge after it) is refused, so
  // the backend does not ask for the fusion
  const gpu = matrixGpu
  const chain = (D: number, keys: number, tokens: number, heads: number) =>
    Effect.gen(function*() {
      const g = Graph.make()
      const vt = yield* g.input("vt", "f16", [keys, D, heads / 4])
      const p = yield* g.input("p", "f16", [keys, tokens, heads])
      const product = yield* Ops.mulMat(vt, p)
      yield* g.output(Ops.cont(Ops.permute(product, [0, 2, 1, 3])))
      const fused = Fusion.optimize(g.build(), { mulMatPermuted: PermutedResult.storesPermuted(gpu) })
      return { product, node: fused.nodes.find((n) => n.op._tag === "MulMatPermuted") }
    })
  it.effect("subgroup-matrix forms keep their form at whole vec4 strides, refuse split-K", () =>
    Effect.gen(function*() {
      const { node, product } = yield* chain(64, 512, 512, 32)
      const kernel = kernelFor(node!, gpu)!
      assert.strictEqual(kernel.variant.family, "mmsg")
      assert.strictEqual(kernel.key, kernelFor(product, gpu)!.key)
      const d = kernel.operands.find((o) => o.name === "d")!
      assert.deepStrictEqual(d.tensor.ne, product.ne)
      assert.deepStrictEqual(d.tensor.nb, [4, 4 * 64 * 32, 4 * 64, 4 * 64 * 32 * 512])
      assert.strictEqual(d.within?.tensor, node)
      const odd = yield* chain(38, 512, 512, 12)
      const oddKernel = kernelFor(odd.node!, gpu)!
      assert.notStrictEqual(oddKernel.key, kernelFor(odd.product, gpu)!.key)
      assert.isFalse(oddKernel.vec4 === true && !(oddKernel.scalar ?? []).includes("d"))
      // few columns: split-K (a merge after it), so the copy stays
      const small = yield* chain(64, 2048, 16, 4)
      assert.isDefined(kernelFor(small.product, gpu)!.next)
      assert.isUndefined(small.node)
    }))
})

describe.skipIf(!adapterAvailable)("WebGPU products storing permuted results", () => {
  it.scoped(
    "attention's V·P layout (and others keeping rows first) without the copy's dispatch",
    () =>
      Effect.gen(function*() {
        // the register and scalar tiles on every adapter (subgroup matrices left unused, as a browser's adapter
        // has none); where the adapter has them, the first case on them too
        const [tiles] = yield* WebGpu.make({ devices: 1, subgroupMatrices: false })
        const [apart] = yield* WebGpu.make({ devices: 1, permutedResults: false, subgroupMatrices: false })
        const [matrices] = yield* WebGpu.make({ devices: 1 })
        const [matricesApart] = yield* WebGpu.make({ devices: 1, permutedResults: false })
        const cases = [
          // V·P of 4 heads over 2 KV heads (broadcast), rows of 16: the register tiles
          { K: 48, M: 16, N: 24, batches: [2, 4], axes: [0, 2, 1, 3], family: "mm4" },
          // rows of 39 values (not whole vec4s): the scalar tiles
          { K: 39, M: 37, N: 20, batches: [3, 3], axes: [0, 2, 1, 3], family: "mm" },
          // rows of 37 in 3 heads: the copy's strides (111 values) not whole vec4s, so the register tiles (their
          // result bound as vec4s) give way to the scalar ones
          { K: 48, M: 37, N: 20, batches: [3, 3], axes: [0, 2, 1, 3], family: "mm" },
          // one column (the matrix-vector kernel), and a permutation of the batch axes too
          { K: 64, M: 32, N: 1, batches: [2, 2], axes: [0, 3, 1, 2], family: "mvh" }
        ] as const
        const runs = [
          ...cases.map((c) => ({ ...c, device: tiles, apart, bound: 1e-6 })),
          // b rounded to f16 as the subgroup-matrix tiles stage it
          ...(WebGpuDevice.hasSubgroupMatrices(matrices)
            ? [{ ...cases[0], family: "mmsg", device: matrices, apart: matricesApart, bound: 1e-5 }]
            : [])
        ]
        for (const { apart, bound, device, ...c } of runs) {
          const { a, b, graph, y } = yield* permutedProduct(c)
          const set = (plan: Parameters<Parameters<typeof fusedOnBoth>[2]>[0]) =>
            Effect.gen(function*() {
              yield* plan.set(a, Generators.values(1, c.K * c.M * c.batches[0]))
              yield* plan.set(b, Generators.values(2, c.K * c.N * c.batches[1]))
            })
          const fused = yield* fusedOnBoth(device, graph, set, [y])
          const ops = fused.entries.map((e) => e.op)
          assert.deepStrictEqual(ops, ["mul_mat_permuted"], JSON.stringify(c))
          assert.strictEqual(fused.entries[0].variant?.family, c.family)
          assert.isBelow(nmse(fused.gpu, fused.cpu), bound, JSON.stringify(c))
          const kept = yield* fusedOnBoth(apart, graph, set, [y])
          assert.deepStrictEqual(kept.entries.map((e) => e.op), ["mul_mat", "cont"])
          assert.deepStrictEqual(fused.gpu, kept.gpu, JSON.stringify(c))
        }
      }),
    60_000
  )

  it.scoped("the copy stays where the product has another reader or its rows move", () =>
    Effect.gen(function*() {
      const [device] = yield* WebGpu.make({ devices: 1 })
      const cases = [
        { K: 32, M: 16, N: 8, batches: [2, 2], axes: [0, 2, 1, 3], alsoRead: true },
        { K: 32, M: 16, N: 8, batches: [2, 2], axes: [1, 0, 2, 3] }
      ] as const
      for (const c of cases) {
        const { a, also, b, graph, y } = yield* permutedProduct(c)
        const { cpu, entries, gpu } = yield* fusedOnBoth(device, graph, (plan) =>
          Effect.gen(function*() {
            yield* plan.set(a, Generators.values(3, c.K * c.M * c.batches[0]))
            yield* plan.set(b, Generators.values(4, c.K * c.N * c.batches[1]))
          }), also === undefined ? [y] : [y, also])
        assert.include(entries.map((e) => e.op), "cont", JSON.stringify(c))
        assert.isBelow(nmse(gpu, cpu), 1e-6, JSON.stringify(c))
      }
    }), 60_000)
})
