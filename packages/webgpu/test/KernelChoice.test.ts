/**
 * Which mul_mat and row kernels the WebGPU backend generates for a device's limits: pure, no adapter needed.
 */
import { Fusion, Graph, Ops } from "@effect-gpu/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { fusesSwiglu } from "../src/internal/kernels/fusedProducts.js"
import type { KernelTarget } from "../src/internal/kernels/kernel.js"
import { mulMat, takesHalfActivations } from "../src/internal/kernels/matmul.js"
import { kernelFor, scratchBytes as nodeScratch } from "../src/internal/kernels/select.js"

const f16Product = Effect.gen(function*() {
  const g = Graph.make()
  const a = yield* g.param("a", "f16", [4096, 4096])
  const b = yield* g.input("b", "f16", [4096, 512])
  return yield* g.output(Ops.mulMat(a, b))
})

const gpu: KernelTarget = { f16: true, maxWorkgroups: 65535, subgroups: true, subgroupMatrix: true }

/** a prompt's product: weights of M rows of K against 512 f16 columns */
const promptProduct = (dtype: "f16" | "q8_0", M: number, K = 4096) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const a = yield* g.param("a", dtype, [K, M])
    return yield* g.output(Ops.mulMat(a, yield* g.input("b", "f16", [K, 512])))
  })

/** the subgroup-matrix kernel of a product's chain (after a weight copy where there is one) */
const matrixKernel = (k: ReturnType<typeof mulMat>) => k.variant.family === "mmsg" ? k : k.next!

describe("mul_mat kernel choice", () => {
  it.effect("the subgroup-matrix tiling is the first that fits the workgroup memory and invocations", () =>
    Effect.gen(function*() {
      const y = yield* f16Product
      // the family and, for subgroup matrices, the tiling (subgroups, fragments, depth)
      const chosen = (target: Partial<KernelTarget>) => {
        const v = mulMat(y, { ...gpu, ...target }, undefined).variant
        return v.family === "mmsg" ? `mmsg:${v.subgroups}:${v.fragments}:${v.depth}` : v.family
      }
      // [workgroup bytes, invocations, kernel]
      const table: ReadonlyArray<readonly [number, number, string]> = [
        [49152, 1024, "mmsg:2x2:4x4:32"],
        [24576, 128, "mmsg:2x2:4x4:32"],
        [24575, 1024, "mmsg:1x1:4x4:16"],
        [49152, 64, "mmsg:1x1:4x4:16"],
        // no tiling fits: the vec4 register-tiled kernel, which reads f16 operands too
        [7167, 1024, "mm4"],
        [49152, 16, "mm4"]
      ]
      for (const [workgroupStorage, workgroupInvocations, kernel] of table) {
        assert.strictEqual(chosen({ workgroupStorage, workgroupInvocations }), kernel, `${workgroupStorage} B`)
      }
      // without subgroup matrices, the register-tiled kernel whatever the limits
      assert.strictEqual(chosen({ subgroupMatrix: false, workgroupStorage: 49152 }), "mm4")
    }))

  it.effect("neighbouring workgroups of a subgroup-matrix product take one row block's column blocks, unless asked for rows", () =>
    Effect.gen(function*() {
      const target = { ...gpu, workgroupStorage: 49152, workgroupInvocations: 1024 }
      // 14336 rows of 128 x 128 blocks against 512 columns: x counts the 4 column blocks, y the 112 row blocks
      for (const dtype of ["f16", "q8_0"] as const) {
        const y = yield* promptProduct(dtype, 14336)
        const columns = matrixKernel(mulMat(y, target, undefined))
        assert.deepStrictEqual([...columns.workgroups], [4, 112, 1], dtype)
        assert.isUndefined(columns.variant.order)
        assert.include(columns.main, "let m0 = wid.y * 128u;")
        assert.include(columns.main, "let n0 = wid.x * 128u;")
        const rows = matrixKernel(mulMat(y, { ...target, matrixOrder: "rows" }, undefined))
        assert.deepStrictEqual([...rows.workgroups], [112, 4, 1], dtype)
        assert.strictEqual(rows.variant.order, "rows")
        assert.include(rows.main, "let m0 = wid.x * 128u;")
      }
      // split K keeps the splits along z, either order; a tiling asked for takes the order asked for
      const split = yield* promptProduct("f16", 4096)
      assert.deepStrictEqual([...mulMat(split, target, undefined).workgroups], [4, 32, 2])
      const tile = { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 4, depth: 32, splits: 1 }
      const asked = mulMat(split, { ...target, matrixTile: tile, matrixOrder: "rows" }, undefined)
      assert.deepStrictEqual([...asked.workgroups], [32, 4, 1])
      assert.strictEqual(asked.variant.order, "rows")
    }))

  it.effect("register-tiled products take one row block's column blocks side by side where asked", () =>
    Effect.gen(function*() {
      const plain = { ...gpu, subgroupMatrix: false }
      const y = yield* promptProduct("f16", 14336)
      // 128 x 128 blocks (8 x 8 a thread): 112 row blocks, 4 column blocks
      const rows = mulMat(y, plain, undefined)
      assert.deepStrictEqual([rows.variant.family, rows.variant.order, [...rows.workgroups]], ["mm4", undefined, [
        112,
        4,
        1
      ]])
      assert.include(rows.main, "let m0 = wid.x * 128u;")
      const columns = mulMat(y, { ...plain, registerOrder: "columns" }, undefined)
      assert.deepStrictEqual([columns.variant.order, [...columns.workgroups]], ["columns", [4, 112, 1]])
      assert.include(columns.main, "let m0 = wid.y * 128u;")
      assert.include(columns.main, "let n0 = wid.x * 128u;")
      // a tile asked for with an order of its own keeps it
      const asked = mulMat(y, {
        ...plain,
        registerOrder: "columns",
        registerTile: { m: 8, n: 8, depth: 8, order: "rows" }
      }, undefined)
      assert.deepStrictEqual([...asked.workgroups], [112, 4, 1])
    }))

  it.effect("f16 products whose last wave of 128 x 128 blocks is part empty take 96 x 128 blocks that fill it", () =>
    Effect.gen(function*() {
      const target = { ...gpu, workgroupStorage: 49152, workgroupInvocations: 1024 }
      const tiling = (dtype: "f16" | "q8_0", M: number) =>
        Effect.map(promptProduct(dtype, M), (y) => {
          // (a quantized product's tiles are those of the f16 product over its weights' copy)
          const k = matrixKernel(mulMat(y, target, undefined))
          return `${k.variant.fragments}${k.variant.splits === undefined ? "" : `/${k.variant.splits}`} ${
            k.workgroups.join("x")
          }`
        })
      // an 8B model's q/k/v (192 blocks of 128 x 128, 256 of 96 x 128), its copy's product alike
      assert.strictEqual(yield* tiling("f16", 6144), "4x3 4x64x1")
      assert.strictEqual(yield* tiling("q8_0", 6144), "4x3 4x64x1")
      // rows not whole blocks of 96 (gate and up, 28672; 14336), and split products, keep 128 x 128
      assert.strictEqual(yield* tiling("f16", 28672), "4x4 4x224x1")
      assert.strictEqual(yield* tiling("f16", 14336), "4x4 4x112x1")
      assert.strictEqual(yield* tiling("f16", 4096), "4x4/2 4x32x2")
      // 96 x 128 would take more waves: 128 x 128 (7680 rows: 240 blocks in one wave, 320 of 96 in two)
      assert.strictEqual(yield* tiling("f16", 7680), "4x4 4x60x1")
      // off where asked
      const y = yield* promptProduct("f16", 6144)
      assert.strictEqual(mulMat(y, { ...target, fillTiles: false }, undefined).variant.fragments, "4x4")
    }))

  it.effect("q8_0 and q4_0 weights past 256 columns are copied into f16 first on GPUs; the copy sits past the split partials", () =>
    Effect.gen(function*() {
      const target = { ...gpu, workgroupStorage: 49152, workgroupInvocations: 1024 }
      const product = (dtype: "q8_0" | "q4_0", M: number, N: number) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const a = yield* g.param("a", dtype, [2048, M])
          return yield* g.output(Ops.mulMat(a, yield* g.input("b", "f16", [2048, N])))
        })
      const families = (k: ReturnType<typeof mulMat>) => {
        const out = [k.variant.family]
        for (let n = k.next; n !== undefined; n = n.next) out.push(n.variant.family)
        return out.join(" + ")
      }
      // [type, M, N, the kernels]: a grid short of workgroups splits K, a merge after the product
      const table = [
        ["q8_0", 2048, 512, "half_copy + mmsg + mmsg_merge"],
        ["q8_0", 14336, 256, "half_copy + mmsg"],
        ["q8_0", 2048, 255, "mmsg + mmsg_merge"],
        ["q4_0", 2048, 512, "half_copy + mmsg + mmsg_merge"],
        ["q4_0", 4096, 255, "mmsg + mmsg_merge"]
      ] as const
      for (const [dtype, M, N, kernels] of table) {
        const y = yield* product(dtype, M, N)
        const k = mulMat(y, target, undefined)
        assert.strictEqual(families(k), kernels, `${dtype} ${M}x${N}`)
        if (k.variant.family !== "half_copy") continue
        // the copy, bound in the result's scratch at a 256-byte boundary past the result and any partials
        const copy = k.operands.find((o) => o.name === "d")!
        const merge = k.next!.next
        const partials = merge === undefined ? 0 : Number(merge.variant.splits) * 4 * M * N
        assert.strictEqual(copy.within?.tensor, y)
        assert.strictEqual(copy.within!.at, Math.ceil((4 * M * N + partials) / 256) * 256)
        assert.strictEqual(nodeScratch(y, target), copy.within!.at + 2 * 2048 * M - 4 * M * N)
        // where the scratch does not fit, the tiles that dequantize as they stage
        assert.strictEqual(k.fallback?.fallback?.variant.family, "mmsg")
        assert.strictEqual(k.fallback?.fallback?.variant.dtype, dtype)
      }
      // forced either way
      const y = yield* product("q4_0", 2048, 128)
      assert.strictEqual(
        families(mulMat(y, { ...target, quantizedPrefill: "copy" }, undefined)).split(" + ")[0],
        "half_copy"
      )
      for (const dtype of ["q8_0", "q4_0"] as const) {
        const q = yield* product(dtype, 2048, 512)
        const tiles = mulMat(q, { ...target, quantizedPrefill: "tiles" }, undefined)
        assert.strictEqual(tiles.variant.family, "mmsg")
        // f16 activations load 16 bytes at a time, falling back to 8 (the blocks' decoding kept) where not aligned
        assert.deepStrictEqual([tiles.variant.load, tiles.variant.dtype, tiles.wide], [8, dtype, true])
        assert.deepStrictEqual([tiles.fallback?.variant.load, tiles.fallback?.variant.dtype], [4, dtype])
      }
      // a vocabulary's head under every position (1 GB of f16) is not copied
      const head = yield* product("q8_0", 128256, 512)
      assert.notStrictEqual(mulMat(head, target, undefined).variant.family, "half_copy")
      // without subgroup matrices (a browser's adapter) a GPU copies too, then runs its f16 register tiles; a
      // software adapter keeps the tiles that dequantize as they load, and so does a GPU without shader-f16
      const tiles = { ...target, subgroupMatrix: false }
      for (const dtype of ["q8_0", "q4_0"] as const) {
        const q = yield* product(dtype, 2048, 512)
        assert.strictEqual(families(mulMat(q, tiles, undefined)), "half_copy + mm4", dtype)
        assert.strictEqual(families(mulMat(q, { ...tiles, software: true }, undefined)), "mm", dtype)
        assert.strictEqual(families(mulMat(q, { ...tiles, f16: false }, undefined)), "mm", dtype)
      }
    }))

  it.effect("a prompt's gated FFN fuses into one gated product on register tiles, not on subgroup matrices", () =>
    Effect.gen(function*() {
      const base = { ...gpu, workgroupStorage: 49152, workgroupInvocations: 1024 }
      /** a stack's product with the swiglu of its halves, fused for `target`: the kernels of its mul_mat_swiglu */
      const gated = (target: KernelTarget, dtype: "f16" | "q8_0", F: number, N = 512, down = false) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const w = yield* g.param("gate_up", dtype, [2048, 2 * F])
          const both = yield* Ops.mulMat(w, yield* g.input("x", "f16", [2048, N]))
          const view = (at: number) => Ops.view(both, [F, N], [both.nb[1]], at * both.nb[0])
          const y = Ops.swiglu(view(0), view(F))
          // read by a down product that takes f16 activations: the gated result in f16
          yield* g.output(down ? Ops.mulMat(yield* g.param("down", "f16", [F, 2048]), y) : y)
          const fused = Fusion.optimize(g.build(), {
            mulMatSwiglu: fusesSwiglu(target),
            ...(down ? { halfActivations: () => true } : {})
          })
          const node = fused.nodes.find((n) => n.op._tag === "MulMatSwiglu")
          if (node === undefined) return undefined
          const chain: Array<ReturnType<typeof kernelFor>> = []
          for (let k = kernelFor(node, target); k !== undefined; k = k.next) chain.push(k)
          return { node, chain }
        })
      // register tiles (no subgroup matrices), by default: 8 rows a thread where the grid gives 256 workgroups
      const plain = { ...base, subgroupMatrix: false }
      const mm4 = (yield* gated(plain, "f16", 4096))!
      assert.deepStrictEqual(mm4.chain.map((k) => [k!.variant.family, k!.variant.m, k!.variant.gated]), [[
        "mm4",
        8,
        true
      ]])
      assert.isUndefined(yield* gated(plain, "f16", 4096, 128))
      assert.isUndefined(yield* gated({ ...plain, gatedPrompts: false }, "f16", 4096))
      // q8_0 with its weights copied into f16 (where asked off subgroup matrices): both halves copied in the
      // scratch after the result, then the gated product over the copy
      const copied = { ...plain, quantizedPrefill: "copy" as const }
      const q8 = (yield* gated(copied, "q8_0", 4096))!
      assert.deepStrictEqual(q8.chain.map((k) => `${k!.variant.family} ${k!.variant.gated}`), [
        "half_copy undefined",
        "mm4 true"
      ])
      const [source, copy] = q8.chain[0]!.operands
      assert.strictEqual(source.extent, 2 * 4096 * 2048 * (34 / 32))
      assert.strictEqual(copy.within?.tensor, q8.node)
      assert.strictEqual(nodeScratch(q8.node, copied), copy.within!.at + 2 * 2 * 4096 * 2048 - 4 * 4096 * 512)
      // on subgroup matrices gate and up stay two products and a swiglu, f16 or quantized
      assert.isUndefined(yield* gated(base, "f16", 4096))
      assert.isUndefined(yield* gated(base, "q8_0", 4096))
      assert.isUndefined(yield* gated(base, "f16", 4096, 512, true))
    }))

  it.effect("products whose 128 x 128 grid is short of workgroups split K over 4 or more, else take 64 x 64 tiles", () =>
    Effect.gen(function*() {
      const target = (extra: Partial<KernelTarget>): KernelTarget => ({
        ...gpu,
        workgroupStorage: 49152,
        workgroupInvocations: 1024,
        ...extra
      })
      // q4_0 in the tiles that dequantize as they stage (by default its weights are copied into f16 first)
      const tiling = (dtype: "f16" | "q4_0", M: number, K = 2048, asked: Partial<KernelTarget> = {}) =>
        Effect.gen(function*() {
          const extra = { ...asked, ...(dtype === "q4_0" ? { quantizedPrefill: "tiles" as const } : {}) }
          const g = Graph.make()
          const a = yield* g.param("a", dtype, [K, M])
          const y = yield* g.output(Ops.mulMat(a, yield* g.input("b", "f32", [K, 512])))
          const kernel = mulMat(y, target(extra), undefined)
          const v = kernel.variant
          const scratch = nodeScratch(y, target(extra))
          // the partial sums of every split lie after the result, and a second dispatch adds them up
          assert.strictEqual(scratch, v.splits === undefined ? 0 : 4 * Number(v.splits) * M * 512, `${dtype} ${M}`)
          assert.strictEqual(kernel.next?.variant.family, v.splits === undefined ? undefined : "mmsg_merge")
          // a merge of plain sums, which the norm reading them next may add itself (splitsIn.ts)
          assert.deepStrictEqual(
            kernel.next?.sums,
            v.splits === undefined ? undefined : { splits: v.splits, count: M * 512 }
          )
          return `${v.family}:${v.subgroups}:${v.fragments}${v.splits === undefined ? "" : `/${v.splits}`}`
        })
      for (const dtype of ["f16", "q4_0"] as const) {
        // 16 x 4 workgroups of 128 x 128 (a 1B model's output projection): K in 4 splits
        assert.strictEqual(yield* tiling(dtype, 2048), "mmsg:2x2:4x4/4", dtype)
        // 24 x 4 (its q, k and v stacked): 2 splits would do, the 64 x 64 tiles instead
        assert.strictEqual(yield* tiling(dtype, 3072), "mmsg:2x1:2x4", dtype)
        // 16 x 4 with K too short for splits of 16 steps: 64 x 64
        assert.strictEqual(yield* tiling(dtype, 2048, 256), "mmsg:2x1:2x4", dtype)
        // 32 x 4 (an 8B model's output projection): 2 splits; 64 x 4: none
        assert.strictEqual(yield* tiling(dtype, 4096), "mmsg:2x2:4x4/2", dtype)
        assert.strictEqual(yield* tiling(dtype, 8192), "mmsg:2x2:4x4", dtype)
        // a tiling asked for wins, splits included
        const tile = { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 4, depth: 32 }
        assert.strictEqual(yield* tiling(dtype, 3072, 2048, { matrixTile: tile }), "mmsg:2x2:4x4/2", dtype)
        const once = { matrixTile: { ...tile, splits: 1 } }
        assert.strictEqual(yield* tiling(dtype, 2048, 2048, once), "mmsg:2x2:4x4", dtype)
        const seven = { matrixTile: { ...tile, splits: 7 } }
        // 64 steps in splits of 10 (the last of 4): 7 splits
        assert.strictEqual(yield* tiling(dtype, 2048, 2048, seven), "mmsg:2x2:4x4/7", dtype)
        const many = { matrixTile: { ...tile, splits: 30 } }
        // 64 steps: splits of 3 steps, 22 of them (none left empty)
        assert.strictEqual(yield* tiling(dtype, 2048, 2048, many), "mmsg:2x2:4x4/22", dtype)
      }
      // 64 rows (attention's P V at head size 64, 32 heads): 128 workgroups of 128 x 128 with half their rows
      // empty; the 64 x 64 tiles, 256 of them, instead
      const pv = Graph.make()
      const v = yield* pv.param("v", "f16", [512, 64, 32])
      const p = yield* pv.output(Ops.mulMat(v, yield* pv.input("p", "f32", [512, 512, 32])))
      assert.deepInclude(mulMat(p, target({}), undefined).variant, { family: "mmsg", subgroups: "2x1" })
      // where the small tiling does not fit (64 invocations), the first that does
      assert.strictEqual(yield* tiling("f16", 3072, 2048, { workgroupInvocations: 32 }), "mmsg:1x1:4x4")
      // a product with its bias (mul_mat_add) is not split (the small tiles, as before splits), and keeps no
      // scratch
      const g = Graph.make()
      const a = yield* g.param("a", "f16", [2048, 2048])
      const bias = yield* g.param("c", "f32", [2048])
      yield* g.output(Ops.add(Ops.mulMat(a, yield* g.input("b", "f32", [2048, 512])), bias))
      const fused = Fusion.optimize(g.build()).nodes.find((n) => n.op._tag === "MulMatAdd")!
      const withBias = mulMat(fused, target({}), fused.src[2])
      assert.deepInclude(withBias.variant, { family: "mmsg", subgroups: "2x1", bias: true })
      assert.isUndefined(withBias.variant.splits)
      assert.isUndefined(withBias.next)
      assert.strictEqual(nodeScratch(fused, target({})), 0)
    }))

  it.effect("products take f16 activations where subgroup matrices compute them (Fusion's halfActivations)", () =>
    Effect.gen(function*() {
      const takes = (dtype: "f16" | "f32" | "q4_0", N: number, extra: Partial<KernelTarget> = {}) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const a = yield* g.param("a", dtype, [256, 64])
          const y = yield* Ops.mulMat(a, yield* g.input("b", "f32", [256, N]))
          return takesHalfActivations({ ...gpu, workgroupStorage: 49152, ...extra })(y)
        })
      assert.isTrue(yield* takes("f16", 9))
      assert.isTrue(yield* takes("q4_0", 9))
      // matrix-vector products (8 columns or fewer), f32 weights, no subgroup matrices: f32 kept
      assert.isFalse(yield* takes("f16", 8))
      assert.isFalse(yield* takes("q4_0", 8))
      assert.isFalse(yield* takes("f32", 64))
      assert.isFalse(yield* takes("f16", 64, { subgroupMatrix: false }))
    }))

  it.effect("f16 weights against f32 activations run on subgroup matrices, b converted as it is staged", () =>
    Effect.gen(function*() {
      // [K, b's type, the load width]: f16 b loads 16 bytes where K allows; f32 b four values at most, one
      // where K is odd
      const table: ReadonlyArray<readonly [number, "f16" | "f32", number]> = [
        [4096, "f16", 8],
        [4096, "f32", 4],
        [4095, "f32", 1]
      ]
      for (const [K, type, load] of table) {
        const g = Graph.make()
        const a = yield* g.param("a", "f16", [K, 2048])
        const y = yield* g.output(Ops.mulMat(a, yield* g.input("b", type, [K, 512])))
        const v = mulMat(y, { ...gpu, workgroupStorage: 49152, workgroupInvocations: 1024 }, undefined).variant
        assert.deepInclude(v, { family: "mmsg", b: type, load }, `${K} ${type}`)
        // without subgroup matrices, the register-tiled kernel (or the plain tiled one for odd K)
        const plain = mulMat(y, { ...gpu, subgroupMatrix: false }, undefined).variant
        assert.strictEqual(plain.family, K % 4 === 0 ? "mm4" : "mm", `${K} ${type}`)
      }
    }))

  it.effect("results smaller than one 16 x 16 f32 matrix are not stored straight from subgroup matrices", () =>
    Effect.gen(function*() {
      // Dawn sizes a binding a subgroup matrix is stored into for a whole matrix (1024 bytes): [M, N, direct]
      const table: ReadonlyArray<readonly [number, number, boolean]> = [
        [24, 9, false],
        [16, 15, false],
        [16, 16, true],
        [2048, 512, true]
      ]
      for (const [M, N, direct] of table) {
        const g = Graph.make()
        const a = yield* g.param("a", "f16", [256, M])
        const y = yield* g.output(Ops.mulMat(a, yield* g.input("b", "f16", [256, N])))
        const k = mulMat(y, { ...gpu, workgroupStorage: 49152, workgroupInvocations: 1024 }, undefined)
        assert.strictEqual(k.variant.family, "mmsg", `${M} x ${N}`)
        assert.strictEqual(k.variant.direct, direct ? true : undefined, `${M} x ${N}`)
        assert.strictEqual(k.main.includes("smst_d("), direct, `${M} x ${N}`)
      }
    }))

  it.effect("f32 loads go unchecked only where M, N and K are whole blocks of the register tile", () =>
    Effect.gen(function*() {
      const loads = (K: number, M: number, N: number) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const a = yield* g.param("a", "f32", [K, M])
          const b = yield* g.input("b", "f32", [K, N])
          const y = yield* g.output(Ops.mulMat(a, b))
          const v = mulMat(y, { ...gpu, registerTile: { m: 8, n: 8, depth: 8 } }, undefined).variant
          assert.deepInclude(v, { family: "mm4", m: 8, n: 8, depth: 8 })
          return v.whole ? "whole" : "edges"
        })
      assert.strictEqual(yield* loads(4096, 4096, 4096), "whole")
      assert.strictEqual(yield* loads(136, 256, 128), "whole")
      // K not a multiple of the depth, M or N not of 128
      assert.strictEqual(yield* loads(132, 256, 128), "edges")
      assert.strictEqual(yield* loads(136, 192, 128), "edges")
      assert.strictEqual(yield* loads(136, 256, 200), "edges")
    }))

  it.effect("16-byte loads where K and the strides are multiples of 8, unless an f16 bias needs single loads; unchecked on whole blocks", () =>
    Effect.gen(function*() {
      const form = (K: number, bias?: "f32" | "f16") =>
        Effect.gen(function*() {
          const g = Graph.make()
          const a = yield* g.param("a", "f16", [K, 256])
          const b = yield* g.input("b", "f16", [K, 64])
          const y = yield* g.output(Ops.mulMat(a, b))
          const c = bias === undefined ? undefined : yield* g.input("c", bias, [256, 64])
          return mulMat(y, { ...gpu, workgroupStorage: 49152, workgroupInvocations: 1024 }, c).variant.load
        })
      // f16 per load: 8 (16 bytes), 4 (8 bytes), 1
      assert.strictEqual(yield* form(4096), 8)
      assert.strictEqual(yield* form(4096, "f32"), 8)
      assert.strictEqual(yield* form(4096, "f16"), 4)
      assert.strictEqual(yield* form(4092), 4)
      assert.strictEqual(yield* form(4094), 1)
      // whole blocks of the 2x2:4x4:32 tiling (128 x 128 x 32) load without bounds checks
      const loads = (K: number, M: number, N: number) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const y = yield* g.output(Ops.mulMat(yield* g.param("a", "f16", [K, M]), yield* g.input("b", "f16", [K, N])))
          return mulMat(y, { ...gpu, workgroupStorage: 49152, workgroupInvocations: 1024 }, undefined).variant.whole
            ? "whole"
            : "edges"
        })
      assert.strictEqual(yield* loads(4096, 4096, 512), "whole")
      assert.strictEqual(yield* loads(4096, 4096, 520), "edges")
      assert.strictEqual(yield* loads(4096, 4000, 512), "edges")
      assert.strictEqual(yield* loads(4080, 4096, 512), "edges")
    }))

  it.effect("quantized weights: whole-word decode for up to 8 columns where b's chunk fits, else per element", () =>
    Effect.gen(function*() {
      const chosen = (N: number, target: Partial<KernelTarget>, dtype: "q4_K" | "q4_0" | "q6_K" = "q4_K", K = 4096) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const a = yield* g.param("a", dtype, [K, 64])
          const y = yield* g.output(Ops.mulMat(a, yield* g.input("b", "f32", [K, N])))
          const v = mulMat(y, { ...gpu, workgroupStorage: 49152, ...target }, undefined).variant
          return v.family === "mvq" || v.family === "mvqs" ? `${v.family} ${v.rows}:${v.stage}` : v.family
        })
      // b staged 4 chunks at a time (all of K = 4096) for one column; 8 columns stage one chunk at a time
      assert.strictEqual(yield* chosen(1, {}), "mvq 2:4")
      assert.strictEqual(yield* chosen(8, {}), "mvq 2:1")
      // asked to, a's rows staged a chunk at a time by 16-byte loads where their bytes are whole 16-byte words
      const staged = { quantizedDecode: { rows: 2, columns: 8, staged: true } }
      assert.strictEqual(yield* chosen(1, staged), "mvqs 2:1")
      assert.strictEqual(yield* chosen(8, staged), "mvqs 2:1")
      // a chunk of 1024 q6_K values is 840 bytes: two chunks at a time
      assert.strictEqual(yield* chosen(1, staged, "q6_K"), "mvqs 2:2")
      // rows of 4064 q4_0 values are 2286 bytes: blocks read in place
      assert.strictEqual(yield* chosen(1, staged, "q4_0", 4064), "mvq 2:4")
      // prefill: blocks staged as f16 tiles on subgroup matrices, else the scalar tiled kernel
      assert.strictEqual(yield* chosen(9, {}), "mmsg")
      assert.strictEqual(yield* chosen(9, { subgroupMatrix: false }), "mm")
      // q4_0 and q8_0 tiles prefetch raw words (decoded as they are staged), a word a lane and 8 lanes a row
      // where b loads four values at a time, else a row a lane, or a row a lane when asked; other blocks
      // decode as they load
      const tile = { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 4, depth: 32 }
      const table = [
        ["q4_0", 4096, {}, "lanes"],
        ["q8_0", 4096, {}, "lanes"],
        ["q4_0", 4096, { matrixTile: { ...tile, laneLoads: false } }, "words"],
        // b's rows 4097 values apart: one value a load
        ["q8_0", 4096, { stride: 4097 }, "words"],
        ["q4_K", 4096, {}, "values"]
      ] as const
      for (const [dtype, K, extra, prefetch] of table) {
        const g = Graph.make()
        const a = yield* g.param("a", dtype, [K, 64])
        const stride = "stride" in extra ? extra.stride : K
        const rows = yield* g.input("b", "f32", [stride, 9])
        const b = stride === K ? rows : yield* Ops.view(rows, [K, 9], [4 * stride], 0)
        const y = yield* g.output(Ops.mulMat(a, b))
        const v = mulMat(y, { ...gpu, workgroupStorage: 49152, ...("stride" in extra ? {} : extra) }, undefined).variant
        assert.deepInclude(v, { prefetch }, `${dtype} ${K}`)
      }
      // b's chunk of 8 columns (32 KiB) and the scratch do not fit 32 KiB; 7 columns do
      assert.strictEqual(yield* chosen(8, { workgroupStorage: 32768 }), "mv")
      assert.strictEqual(yield* chosen(7, { workgroupStorage: 32768 }), "mvq 2:1")
      // 7 columns' chunk and a's rows do not fit 32 KiB: blocks read in place
      assert.strictEqual(yield* chosen(7, { workgroupStorage: 32768, ...staged }), "mvq 2:1")
      // a software adapter: one column, one row per lane group (its compiler takes seconds per column)
      assert.strictEqual(yield* chosen(1, { software: true }), "mvq 1:1")
      assert.strictEqual(yield* chosen(2, { software: true }), "mv")
      assert.strictEqual(
        yield* chosen(3, { quantizedDecode: { rows: 4, columns: 4, stage: 2, staged: false } }),
        "mvq 4:2"
      )
      assert.strictEqual(yield* chosen(3, { quantizedDecode: { rows: 4, columns: 4, staged: true } }), "mvqs 4:1")
      // with dot4I8Packed, every block type for one column in the int8 form, where K is whole pairs of blocks
      // (whole blocks for the k-quants) and rows are whole words
      const dot4 = { dot4: true }
      assert.strictEqual(yield* chosen(1, dot4, "q4_0"), "mvq8")
      assert.strictEqual(yield* chosen(1, dot4, "q4_0", 4064), "mvq 2:4")
      assert.strictEqual(yield* chosen(2, dot4, "q4_0"), "mvq 2:4")
      assert.strictEqual(yield* chosen(1, dot4, "q4_K"), "mvq8")
      assert.strictEqual(yield* chosen(1, dot4, "q6_K"), "mvq8")
      // q6_K rows of 3 blocks (630 bytes) are not whole words
      assert.strictEqual(yield* chosen(1, dot4, "q6_K", 768), "mvq 2:1")
      assert.strictEqual(
        yield* chosen(1, { ...dot4, quantizedDecode: { rows: 2, columns: 8, int8: false } }, "q4_0"),
        "mvq 2:4"
      )
      // b's K int8 values and their blocks' scales must fit the workgroup memory
      assert.strictEqual(yield* chosen(1, { ...dot4, workgroupStorage: 4096 }, "q4_0"), "mv")
    }))

  it.effect("row kernels widen their workgroups where the rows are too few to fill the GPU", () =>
    Effect.gen(function*() {
      const threads = (rows: number, n: number, target: KernelTarget) =>
        Effect.gen(function*() {
          const g = Graph.make()
          const x = yield* g.input("x", "f32", [n, rows])
          const y = yield* g.output(Ops.rmsNorm(x, 1e-5))
          return kernelFor(y, target)!.variant.threads
        })
      const h200: KernelTarget = { ...gpu, subgroupSize: 32, workgroupInvocations: 1024 }
      // a decoding step's norm: a thread per 4 values, up to the invocations a workgroup may have
      assert.strictEqual(yield* threads(1, 4096, h200), 1024)
      assert.strictEqual(yield* threads(1, 2048, h200), 512)
      assert.strictEqual(yield* threads(1, 16384, h200), 1024)
      assert.strictEqual(yield* threads(1, 4096, { ...h200, workgroupInvocations: 256 }), 256)
      // never fewer than 256; a prompt's rows keep 256
      assert.strictEqual(yield* threads(1, 96, h200), 256)
      assert.strictEqual(yield* threads(512, 4096, h200), 256)
      // a software adapter: about 16 values a thread
      assert.strictEqual(yield* threads(1, 4096, { ...h200, software: true }), 256)
      assert.strictEqual(yield* threads(1, 96, { ...h200, software: true }), 8)
    }))
})
