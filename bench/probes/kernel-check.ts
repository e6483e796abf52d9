/**
 * Products and decode attention on a real GPU against the CPU backend: the kernels a device offers that
 * lavapipe lacks (subgroup matrices) are forced in tests only where an adapter has them, so this checks them
 * where one does (and the subgroup kernels at the GPU's subgroup size, the attention's merge among them, and
 * split-K products in forced tilings). For
 * each case: the kernels the trace names and the NMSE against the CPU. Exits 1 when a case is off.
 *
 *   tsx kernel-check.ts [SECTION...]   (bundle it as bench/llm.ts is to run it on the GPU machine)
 *
 * SECTION: products, split, batched, attention, prefill, stack, plain, inturn, stores, norms, merge, mvsplit,
 * perm, sums (default: all). KC_TILE=SRxSC:FRxFC:DEPTH forces a subgroup-matrix tiling on the products'
 * f16 and copied forms (a tiling not yet among the defaults).
 */
import { Graph, Ops } from "@effect-gpu/core"
import type { Quantized } from "@effect-gpu/core/DType"
import * as Quant from "@effect-gpu/core/Quant"
import { Forward } from "@effect-gpu/llm"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { parseTile } from "../tilings.js"
import { against } from "./against.js"

/** a's type, b's type, K, M (a's rows), N (b's rows), the NMSE allowed */
const cases: ReadonlyArray<readonly ["f16" | Quantized, "f16" | "f32", number, number, number, number]> = [
  ["f16", "f16", 64, 48, 40, 1e-6],
  ["f16", "f32", 64, 48, 40, 1e-5],
  ["f16", "f32", 63, 48, 40, 1e-5],
  ["f16", "f32", 2048, 256, 512, 1e-5],
  // 128 x 128 tiles would give few workgroups: the small tiling
  ["f16", "f32", 2048, 2048, 512, 1e-5],
  ["q4_0", "f32", 2048, 2048, 512, 1e-4],
  ["q4_0", "f32", 2048, 256, 512, 1e-4],
  ["q8_0", "f32", 2048, 256, 512, 1e-4],
  // q4_K keeps the prefetch that decodes; q4_0 and q8_0 odd-sized rows start blocks at 2 mod 4
  // (M x N large enough for the 128 x 128 tiles)
  ["q4_K", "f32", 2048, 256, 512, 1e-4],
  ["q6_K", "f32", 2048, 256, 512, 1e-4],
  ["q4_0", "f32", 96, 4100, 520, 1e-4],
  ["q8_0", "f32", 96, 4100, 520, 1e-4],
  ["f16", "f32", 64, 4100, 520, 1e-5],
  // f16 activations (Fusion's halfActivations) against blocks
  ["q4_0", "f16", 2048, 256, 512, 1e-4],
  ["q8_0", "f16", 96, 4100, 520, 1e-4],
  // f16 matrix-vector by subgroups (32 lanes here, 8 on lavapipe): a 1B model's shapes, and 3 columns
  ["f16", "f32", 2048, 8192, 1, 1e-6],
  ["f16", "f32", 8192, 2048, 1, 1e-6],
  ["f16", "f32", 2048, 333, 3, 1e-6]
]

/** the sections asked for on the command line (all where none is) */
const sections = process.argv.slice(2)
/** a section's cases, or none where it is not asked for */
const only = <A>(section: string, items: ReadonlyArray<A>): ReadonlyArray<A> =>
  sections.length === 0 || sections.includes(section) ? items : []

const program = Effect.gen(function*() {
  const forced = process.env.KC_TILE !== undefined ? { matrixTile: parseTile(process.env.KC_TILE) } : {}
  const [gpu] = yield* WebGpu.make({ devices: 1, ...forced })
  // quantized weights past 256 columns: copied into f16 first (q8_0's default) and dequantized by the tiles
  // as they stage (the others'), each forced
  const [copyGpu] = yield* WebGpu.make({ devices: 1, quantizedPrefill: "copy", ...forced })
  const [wideCopyGpu] = yield* WebGpu.make({ devices: 1, quantizedPrefill: "copy", copyLoads: "vec4", ...forced })
  const [wordsCopyGpu] = yield* WebGpu.make({ devices: 1, quantizedPrefill: "copy", copyLoads: "words", ...forced })
  const [tilesGpu] = yield* WebGpu.make({ devices: 1, quantizedPrefill: "tiles" })
  const [mergingGpu] = yield* WebGpu.make({ devices: 1, mergesInProducts: true })
  // subgroup-matrix products whose neighbouring workgroups take a's row blocks (the default: b's columns)
  const [rowsGpu] = yield* WebGpu.make({ devices: 1, matrixOrder: "rows", ...forced })
  let failed = 0
  for (const [at, bt, K, M, N, bound] of only("products", cases)) {
    const forms = at !== "f16" && N >= 256 ? ["copy", "copy-vec4", "copy-words", "tiles"] as const : [undefined]
    for (const form of [...forms, "rows" as const]) {
      const g = Graph.make()
      const a = yield* g.param("a", at, [K, M])
      const b = yield* g.input("b", bt, [K, N])
      const y = yield* g.output(Ops.mulMat(a, b))
      const weights = Generators.values(1, K * M)
      const devices = {
        tiles: tilesGpu,
        copy: copyGpu,
        "copy-vec4": wideCopyGpu,
        "copy-words": wordsCopyGpu,
        rows: rowsGpu
      }
      const device = form === undefined ? gpu : devices[form]
      const { error, kernels } = yield* against(device, g, y, [
        [a, at === "f16" ? weights : Quant.unsafeQuantize(at, weights)],
        [b, Generators.values(2, K * N)]
      ])
      // the rows order shows in the kernel's name only where the product is on subgroup matrices
      // (the rows form's device copies q4_0 and q8_0 weights or not by default)
      const ok = error <= bound &&
        (form === "rows" || kernels.startsWith("half_copy") === (form?.startsWith("copy") === true)) &&
        (form === "rows" || !kernels.includes("order=rows")) && (form !== "rows" || !kernels.includes("mmsg") ||
          kernels.includes("order=rows"))
      if (!ok) failed++
      console.log(JSON.stringify({ a: at, b: bt, K, M, N, form, kernels, nmse: error, bound, ok }))
    }
  }
  // split-K (a block's K range over several workgroups, their partials added by a second dispatch) in
  // forced tilings: K past whole steps, a batch broadcast (a's 2 batches under b's 4), a's types; with a
  // row bias (mul_mat_add) the product is not split. Copied: quantized weights copied into f16 first, the
  // copy placed after the split's partials
  const splitCases = [
    ["f16", "2x2:4x4:32/3", 1000, 200, 100, false, false],
    ["f16", "2x2:4x4:32/3", 1000, 200, 100, true, false],
    ["f16", "1x1:4x4:16/4", 1024, 130, 70, false, false],
    ["q4_0", "2x2:4x4:32/5", 2048, 256, 130, false, false],
    ["q4_0", "2x2:4x4:32/5", 2048, 256, 130, true, false],
    ["q8_0", "2x1:2x4:32/2", 992, 96, 40, false, false],
    // splits of 1: the unsplit kernel, no merge; w: blocks loaded a row a lane
    ["q4_0", "2x2:4x4:32/1", 2048, 256, 130, false, false],
    ["q4_0", "2x2:4x4:32/3w", 2048, 256, 130, false, false],
    ["q8_0", "2x1:2x4:32/1w", 992, 96, 40, true, false],
    ["q4_0", "2x2:4x4:32/5", 2048, 256, 130, false, true],
    ["q8_0", "2x1:2x4:32/2", 992, 96, 40, false, true],
    ["q4_0", "2x2:4x4:32/3", 2048, 256, 130, true, true]
  ] as const
  for (const [at, tiling, K, M, N, bias, copied] of only("split", splitCases)) {
    const [dev] = yield* WebGpu.make({
      devices: 1,
      matrixTile: parseTile(tiling),
      quantizedPrefill: copied ? "copy" : "tiles"
    })
    const g = Graph.make()
    const a = yield* g.param("a", at, [K, M, 2])
    const b = yield* g.input("b", "f32", [K, N, 4])
    const c = bias ? yield* g.param("c", "f32", [M, 1, 1]) : undefined
    const product = yield* Ops.mulMat(a, b)
    const y = yield* g.output(c ? Ops.add(product, c) : product)
    const weights = Generators.values(3, K * M * 2)
    const { error, kernels } = yield* against(dev, g, y, [
      [a, at === "f16" ? weights : Quant.unsafeQuantize(at, weights)],
      [b, Generators.values(4, K * N * 4)],
      ...(c ? [[c, Generators.values(5, M)] as const] : [])
    ])
    const bound = at === "f16" ? 1e-5 : 1e-4
    const split = !tiling.includes("/1") && !bias
    const lanes = at !== "f16" && !tiling.endsWith("w") && !copied
    const ok = error <= bound && kernels.includes("splits=") === split && kernels.includes("mmsg_merge") === split &&
      kernels.includes("prefetch=lanes") === lanes && kernels.includes("bias=true") === bias &&
      kernels.startsWith("half_copy") === copied
    if (!ok) failed++
    console.log(
      JSON.stringify({
        a: at,
        tiling,
        K,
        M,
        N,
        batches: "2/4",
        bias,
        copied,
        kernels,
        nmse: error,
        bound,
        ok
      })
    )
  }
  // attention's products at a prompt, batched over heads: q k^T (K 64: the blocks stored straight from
  // their registers, as every block inside a product without a bias is) and p v (64 rows: the small tiles;
  // 300 columns leave edge blocks that go through workgroup memory)
  for (const [K, M, N] of only("batched", [[64, 512, 512], [512, 64, 300]] as const)) {
    const g = Graph.make()
    const a = yield* g.param("a", "f16", [K, M, 8])
    const b = yield* g.input("b", "f32", [K, N, 8])
    const y = yield* g.output(Ops.mulMat(a, b))
    const { error, kernels } = yield* against(gpu, g, y, [
      [a, Generators.values(6, K * M * 8)],
      [b, Generators.values(7, K * N * 8)]
    ])
    const ok = error <= 1e-5 && kernels.includes("direct=true")
    if (!ok) failed++
    console.log(JSON.stringify({ a: "f16", K, M, N, batches: 8, kernels, nmse: error, bound: 1e-5, ok }))
  }
  // decode attention over a model's heads (32 / 8) at 640 keys, its keys in 5 (the default) to 70 splits, a
  // query head a workgroup or all four of a KV head's, the keys form's scores four lanes a key (the default)
  // or one, a block's V rows loaded with its K rows (the keys form's default) or after the scores
  const attentionCases = [
    [64, 0, "keys", 0, 0, true],
    [128, 40, "keys", 0, 0, true],
    [64, 70, "dims", 0, 0, false],
    [128, 0, "keys", 4, 0, true],
    [128, 0, "keys", 0, 1, true],
    [128, 0, "keys", 0, 0, false]
  ] as const
  for (const [D, splits, across, heads, keyLanes, valuesAhead] of only("attention", attentionCases)) {
    const forced = {
      ...(splits > 0 ? { splits } : {}),
      ...(heads > 0 ? { heads } : {}),
      ...(keyLanes > 0 ? { keyLanes } : {}),
      ...(across === "keys" && !valuesAhead ? { valuesAhead } : {}),
      across
    }
    const [dev] = yield* WebGpu.make({ devices: 1, attentionDecode: forced })
    const keys = 640
    const g = Graph.make()
    const q = yield* g.input("q", "f32", [D, 1, 32])
    const k = yield* g.input("k", "f16", [D, keys, 8])
    const v = yield* g.input("v", "f16", [D, keys, 8])
    const mask = yield* g.input("mask", "f16", [keys, 1])
    const y = yield* g.output(Ops.flashAttnExt(q, k, v, { scale: 1 / Math.sqrt(D), mask }))
    const { error, kernels } = yield* against(dev, g, y, [
      ...[q, k, v].map((t, i) => [t, Generators.values(10 + i, t.ne[0] * t.ne[1] * t.ne[2])] as const),
      [mask, Generators.values(13, keys).map((x, j) => j % 7 === 0 ? -Infinity : x)]
    ])
    // the default takes the most heads that still give 256 workgroups: 5 splits of 8 KV heads do not (one
    // head a workgroup), 40 and 70 do (all four)
    const expected = heads > 0 ? heads : splits > 0 ? 4 : 1
    const lanes = across === "keys" && keyLanes !== 1 ? "keyLanes=4" : undefined
    const ok = error <= 1e-6 && kernels.includes(`heads=${expected}`) &&
      (lanes === undefined ? !kernels.includes("keyLanes=") : kernels.includes(lanes)) &&
      kernels.includes("valuesAhead=true") === valuesAhead
    if (!ok) failed++
    console.log(
      JSON.stringify({
        attention: { D, keys, splits, across, heads, keyLanes, valuesAhead },
        kernels,
        nmse: error,
        bound: 1e-6,
        ok
      })
    )
  }
  // prompt attention on subgroup matrices: the one-pass form (64 or 128 query rows a workgroup; a causal
  // mask whose later blocks it skips; q scaled up so that rows' maxima grow block after block and O is
  // rescaled; a sliding window of 64 keys, whose earlier blocks it skips before blocks its rows see; sinks;
  // ALiBi and a soft cap; K, V and the mask loaded a block ahead or not), and the two-pass form where
  // the mask's rows do not load 8 f16 at a time (300 keys); the keys split over workgroups and merged by a
  // second dispatch (the default for these few query rows: 2 or 4 splits), unsplit, and in 8 splits of which
  // the last have no keys. Each: D, n_q, keys, subgroups (0: the default), mask, sinks, q's scale, prefetch,
  // ALiBi and soft cap, staged rows spread over the banks (the default) or packed, splits (0: the default),
  // the kernel expected
  const tiles = "flash_attn_tiles"
  const prefillCases = [
    [128, 100, 304, 4, "random", false, 1, true, false, true, 1, tiles],
    [64, 200, 512, 8, "causal", true, 1, true, false, true, 0, tiles],
    [128, 200, 512, 8, "causal", true, 1, true, false, false, 1, tiles],
    [128, 64, 296, 0, "random", false, 12, true, false, true, 0, tiles],
    [128, 64, 296, 0, "random", false, 12, true, false, false, 1, tiles],
    [64, 100, 304, 4, "causal", false, 4, false, false, true, 0, tiles],
    [128, 200, 512, 8, "window", false, 1, true, false, true, 0, tiles],
    [64, 200, 512, 4, "window", true, 1, false, false, true, 1, tiles],
    [64, 70, 304, 4, "random", true, 2, true, true, true, 8, tiles],
    [64, 100, 300, 0, "random", false, 1, true, false, true, 0, "flash_attn_mma"]
  ] as const
  for (
    const [D, nQ, keys, subgroups, maskKind, withSinks, qScale, prefetch, capped, spread, splits, family] of only(
      "prefill",
      prefillCases
    )
  ) {
    const c = {
      D,
      nQ,
      keys,
      subgroups,
      mask: maskKind,
      sinks: withSinks,
      qScale,
      prefetch,
      capped,
      spread,
      splits,
      family
    }
    const [dev] = yield* WebGpu.make({
      devices: 1,
      attentionPrefill: {
        ...(c.subgroups > 0 ? { subgroups: c.subgroups } : {}),
        ...(c.splits > 0 ? { splits: c.splits } : {}),
        prefetch: c.prefetch,
        spread: c.spread
      }
    })
    const g = Graph.make()
    const q = yield* g.input("q", "f32", [c.D, c.nQ, 32])
    const k = yield* g.input("k", "f16", [c.D, c.keys, 8])
    const v = yield* g.input("v", "f16", [c.D, c.keys, 8])
    const mask = yield* g.input("mask", "f16", [c.keys, c.nQ])
    const sinks = c.sinks ? yield* g.input("sinks", "f32", [32]) : undefined
    const bias = c.capped ? { maxBias: 8, logitSoftcap: 30 } : {}
    const y = yield* g.output(Ops.flashAttnExt(q, k, v, { scale: 1 / Math.sqrt(c.D), mask, sinks, ...bias }))
    // causal: the prompt's rows follow 100 cached positions
    // window: row i at position keys - n_q + i sees the 64 keys up to it
    const maskValues = c.mask === "causal"
      ? Forward.causalMask(c.nQ, 100, c.keys)
      : c.mask === "window"
      ? Float32Array.from({ length: c.keys * c.nQ }, (_, x) => {
        const at = c.keys - c.nQ + Math.floor(x / c.keys)
        return x % c.keys <= at && x % c.keys > at - 64 ? 0 : -Infinity
      })
      : Generators.values(13, c.keys * c.nQ).map((x, j) => j % 7 === 0 ? -Infinity : x)
    const { error, kernels } = yield* against(dev, g, y, [
      [q, Generators.values(10, c.D * c.nQ * 32).map((x) => x * c.qScale)],
      ...[k, v].map((t, i) => [t, Generators.values(11 + i, t.ne[0] * t.ne[1] * t.ne[2])] as const),
      [mask, maskValues],
      ...(sinks ? [[sinks, Generators.values(14, 32)] as const] : [])
    ])
    const ok = error <= 1e-5 && kernels.startsWith(c.family) &&
      (c.subgroups === 0 || kernels.includes(`subgroups=${c.subgroups}`)) &&
      (c.family !== tiles || (kernels.includes(`prefetch=${c.prefetch}`) && kernels.includes(`spread=${c.spread}`))) &&
      (c.family !== tiles || c.splits === 0 || (c.splits === 1) !== kernels.includes(`splits=${c.splits}`))
    if (!ok) failed++
    console.log(JSON.stringify({ prefillAttention: c, kernels, nmse: error, bound: 1e-5, ok }))
  }
  // q, k and v stacked in the int8 form at 32 lanes: parts of whole workgroups (a model's: each workgroup
  // reads its part alone), and parts that straddle them
  const stacks = [
    ["q4_0", 2048, [2048, 512, 512]],
    ["q8_0", 4096, [4096, 1024, 1024]],
    ["q8_0", 640, [40, 8, 9]],
    ["q4_K", 4096, [4096, 1024, 1024]],
    ["q6_K", 512, [40, 8, 9]],
    // parts of two types (as llama.cpp's Q4_K_M has them), whole workgroups and straddling
    ["q4_K+q4_K+q6_K", 4096, [4096, 1024, 1024]],
    ["q4_K+q6_K+q4_K", 512, [40, 8, 9]]
  ] as const
  for (const [types, K, rows] of only("stack", stacks)) {
    const at = (i: number) => (types.split("+")[i] ?? types) as Quantized
    const g = Graph.make()
    const ws = yield* Effect.forEach(rows, (m, i) => g.param(`w${i}`, at(i), [K, m]))
    const x = yield* g.input("x", "f32", [K, 1])
    const ys = yield* Effect.forEach(ws, (w) => Ops.mulMat(w, x))
    const y = yield* g.output(Ops.concat(Ops.concat(ys[0], ys[1], 0), ys[2], 0))
    const { error, kernels } = yield* against(gpu, g, y, [
      ...ws.map((w, i) => [w, Quant.unsafeQuantize(at(i), Generators.values(20 + i, K * w.ne[1]))] as const),
      [x, Generators.values(30, K)]
    ])
    const uniform = rows[0] % 16 === 0
    const ok = error <= 1e-4 && kernels.includes("mvq8_stack") && kernels.includes("uniform=true") === uniform
    if (!ok) failed++
    console.log(JSON.stringify({ stack: { a: types, K, rows }, kernels, nmse: error, bound: 1e-4, ok }))
  }
  // the int8 form's plain and gated products at 32 lanes, every block type (the k-quants' b rounded as q8_K),
  // against the CPU's unfused graph
  const plains = [
    ["q4_0", 4096, 1000],
    ["q4_1", 2048, 37],
    ["q5_0", 4096, 100],
    ["q8_0", 2560, 37],
    ["q4_K", 4096, 1000],
    ["q6_K", 14336, 37]
  ] as const
  for (const [at, K, M] of only("plain", plains)) {
    for (const gated of [false, true]) {
      const g = Graph.make()
      const a = yield* g.param("a", at, [K, M])
      const u = yield* g.param("u", at, [K, M])
      const x = yield* g.input("x", "f32", [K, 1])
      const y = yield* g.output(gated ? Ops.swiglu(Ops.mulMat(a, x), Ops.mulMat(u, x)) : Ops.mulMat(a, x))
      const { error, kernels } = yield* against(gpu, g, y, [
        [a, Quant.unsafeQuantize(at, Generators.values(40, K * M))],
        ...(gated ? [[u, Quant.unsafeQuantize(at, Generators.values(41, K * M))] as const] : []),
        [x, Generators.values(42, K)]
      ])
      const ok = error <= 1e-4 && kernels.includes(gated ? "mvq8_swiglu" : "mvq8")
      if (!ok) failed++
      console.log(JSON.stringify({ int8: { a: at, K, M, gated }, kernels, nmse: error, bound: 1e-4, ok }))
    }
  }
  // the int8 form's workgroups taking row groups in turn at 32 lanes (int8Groups: fewer workgroups than
  // groups, each over one rounding of b): plain and gated products and a stack of whole-workgroup parts
  const [inTurn] = yield* WebGpu.make({ devices: 1, quantizedDecode: { rows: 2, columns: 8, int8Groups: 100 } })
  const turns = [["q8_0", 4096, [4096]], ["q4_0", 4096, [4000, 4000]], ["q8_0", 4096, [4096, 1024, 1024]]] as const
  for (const [at, K, rows] of only("inturn", turns)) {
    const g = Graph.make()
    const ws = yield* Effect.forEach(rows, (m, i) => g.param(`w${i}`, at, [K, m]))
    const x = yield* g.input("x", "f32", [K, 1])
    const ys = yield* Effect.forEach(ws, (w) => Ops.mulMat(w, x))
    const y = yield* g.output(
      ys.length === 1
        ? ys[0]
        : ys.length === 2
        ? Ops.swiglu(ys[0], ys[1])
        : Ops.concat(Ops.concat(ys[0], ys[1], 0), ys[2], 0)
    )
    const { error, kernels } = yield* against(inTurn, g, y, [
      ...ws.map((w, i) => [w, Quant.unsafeQuantize(at, Generators.values(50 + i, K * w.ne[1]))] as const),
      [x, Generators.values(60, K)]
    ])
    const ok = error <= 1e-4 && kernels.includes("inTurn=")
    if (!ok) failed++
    console.log(JSON.stringify({ inTurn: { a: at, K, rows }, kernels, nmse: error, bound: 1e-4, ok }))
  }
  // a layer's q/k/v stack (the int8 form; f16 weights by subgroups) storing its keys (rotated, mode 0) and
  // values into f16 caches at 32 lanes (an 8B model's shapes), against the CPU's products, rope and set_rows
  for (const at of only("stores", ["q4_0", "q4_K", "f16"] as const)) {
    const g = Graph.make()
    const x = yield* g.input("x", "f32", [4096, 1])
    const ws = yield* Effect.forEach([4096, 1024, 1024], (m, i) => g.param(`w${i}`, at, [4096, m]))
    const keys = yield* g.param("keys", "f16", [1024, 16])
    const values = yield* g.param("values", "f16", [1024, 16])
    const pos = yield* g.input("pos", "i32", [1])
    const rows = yield* g.input("rows", "i32", [1])
    const [q, k, v] = yield* Effect.forEach(ws, (w) => Ops.mulMat(w, x))
    const r = Ops.rope(Ops.reshape(k, [128, 8, 1]), pos, { nDims: 128, mode: 0, freqBase: 500000 })
    const yk = Ops.setRows(keys, Ops.reshape(r, [1024, 1]), rows)
    const yv = Ops.setRows(values, v, rows)
    const flat = (t: Parameters<typeof Ops.cpy>[0], n: number) => Ops.reshape(Ops.cpy(t, "f32"), [n])
    const y = yield* g.output(Ops.concat(Ops.concat(flat(q, 4096), flat(yk, 16384), 0), flat(yv, 16384), 0))
    const { error, kernels } = yield* against(gpu, g, y, [
      ...ws.map((w, i) => {
        const v = Generators.values(50 + i, 4096 * w.ne[1])
        return [w, at === "f16" ? v : Quant.unsafeQuantize(at, v)] as const
      }),
      [x, Generators.values(53, 4096)],
      [keys, Generators.values(54, 1024 * 16)],
      [values, Generators.values(55, 1024 * 16)],
      [pos, Int32Array.from([700])],
      [rows, Int32Array.from([11])]
    ])
    const ok = error <= 1e-4 && kernels.includes("stores=kv") && !kernels.includes("rope_set_rows")
    if (!ok) failed++
    console.log(JSON.stringify({ stackStores: { a: at }, kernels, nmse: error, bound: 1e-4, ok }))
  }
  // a 1B model's norms made by the products that read them (normIn.ts; the int8 form, f16 weights by
  // subgroups) at 32 lanes: a q/k/v stack over rms_norm(x) * w and a gated FFN over rms_norm(x2) * w2, against
  // the CPU's norms and products; the 32-value types read the norm once as b is rounded (normOnce, the
  // default), and also twice where asked
  const [twice] = yield* WebGpu.make({ devices: 1, quantizedDecode: { rows: 2, columns: 8, normOnce: false } })
  const normRuns = [
    ...(["q4_0", "q8_0", "q4_K", "f16"] as const).map((at) => [at, gpu] as const),
    ["q4_0", twice] as const,
    ["q8_0", twice] as const
  ]
  for (const [at, on] of only("norms", normRuns)) {
    const g = Graph.make()
    const [x, x2] = yield* Effect.forEach(["x", "x2"], (n) => g.input(n, "f32", [2048, 1]))
    const [w, w2] = yield* Effect.forEach(["w", "w2"], (n) => g.param(n, "f32", [2048]))
    const ws = yield* Effect.forEach([2048, 512, 512, 8192, 8192], (m, i) => g.param(`w${i}`, at, [2048, m]))
    const norm = Ops.mul(Ops.rmsNorm(x, 1e-5), w)
    const norm2 = Ops.mul(Ops.rmsNorm(x2, 1e-5), w2)
    const [q, k, v] = yield* Effect.forEach(ws.slice(0, 3), (wt) => Ops.mulMat(wt, norm))
    const [gate, up] = yield* Effect.forEach(ws.slice(3), (wt) => Ops.mulMat(wt, norm2))
    const y = yield* g.output(Ops.concat(Ops.concat(Ops.concat(q, k, 0), v, 0), Ops.swiglu(gate, up), 0))
    const { error, kernels } = yield* against(on, g, y, [
      ...ws.map((wt, i) => {
        const v = Generators.values(60 + i, 2048 * wt.ne[1])
        return [wt, at === "f16" ? v : Quant.unsafeQuantize(at, v)] as const
      }),
      [x, Generators.values(66, 2048)],
      [x2, Generators.values(67, 2048)],
      [w, Generators.values(68, 2048).map((z) => 1 + z)],
      [w2, Generators.values(69, 2048).map((z) => 1 - z)]
    ])
    const ok = error <= 1e-4 && kernels.split("norm=true").length === 3 &&
      !kernels.split(" + ").some((k) => k.startsWith("row")) &&
      kernels.split("normOnce=true").length === (on === gpu && (at === "q4_0" || at === "q8_0") ? 3 : 1)
    if (!ok) failed++
    console.log(
      JSON.stringify({ normsInProducts: { a: at, twice: on === twice }, kernels, nmse: error, bound: 1e-4, ok })
    )
  }
  // attention's split partials merged by the output projection that reads them (mergeIn.ts) at 32 lanes: a
  // decoding step at 640 keys with the 1B and 8B shapes (32 query heads over 8, D 64 and 128), the device's
  // own splits (the 8B shapes' merge asked for: not taken by default), q4_0 and f16 weights, against the CPU's
  // attention and product
  for (const [D, wt] of only("merge", [[64, "q4_0"], [128, "q4_0"], [64, "f16"], [128, "f16"]] as const)) {
    const g = Graph.make()
    const q = yield* g.input("q", "f32", [D, 32, 1])
    const k = yield* g.input("k", "f16", [D, 640, 8])
    const v = yield* g.input("v", "f16", [D, 640, 8])
    const mask = yield* g.input("mask", "f16", [640, 1])
    const wo = yield* g.param("wo", wt, [32 * D, 32 * D])
    const attn = Ops.flashAttnExt(Ops.permute(q, [0, 2, 1, 3]), k, v, { scale: 1 / Math.sqrt(D), mask })
    const y = yield* g.output(Ops.mulMat(wo, Ops.reshape(attn, [32 * D, 1])))
    const { error, kernels } = yield* against(D === 128 ? mergingGpu : gpu, g, y, [
      [q, Generators.values(70, D * 32)],
      [k, Generators.values(71, D * 640 * 8)],
      [v, Generators.values(72, D * 640 * 8)],
      [mask, new Float32Array(640)],
      [
        wo,
        wt === "f16"
          ? Generators.values(73, 32 * D * 32 * D)
          : Quant.unsafeQuantize(wt, Generators.values(73, 32 * D * 32 * D))
      ]
    ])
    const ok = error <= 1e-4 && kernels.includes("merge=32x") && !kernels.includes("flash_attn_merge")
    if (!ok) failed++
    console.log(JSON.stringify({ mergeInProduct: { D, wo: wt }, kernels, nmse: error, bound: 1e-4, ok }))
  }
  // the int8 form with K split over workgroups (int8Splits.ts; QuantizedDecode.int8Split, off by default) at
  // 32 lanes, an 8B model's decoding shapes: the output projection and down with the residual added (2 and 7
  // splits of 2048), gate and up with their swiglu, against the CPU's products
  const [splitGpu] = yield* WebGpu.make({ devices: 1, quantizedDecode: { rows: 2, columns: 8, int8Split: 2048 } })
  const int8SplitCases = [["q8_0", 4096, 4096, "add"], ["q4_0", 14336, 4096, "add"], ["q8_0", 4096, 14336, "gated"], [
    "q4_K",
    14336,
    4096,
    "add"
  ]] as const
  for (const [at, K, M, form] of only("mvsplit", int8SplitCases)) {
    const g = Graph.make()
    const a = yield* g.param("a", at, [K, M])
    const u = yield* g.param("u", at, [K, M])
    const x = yield* g.input("x", "f32", [K, 1])
    const r = yield* g.input("r", "f32", [M, 1])
    const y = yield* g.output(
      form === "gated" ? Ops.swiglu(Ops.mulMat(a, x), Ops.mulMat(u, x)) : Ops.add(r, Ops.mulMat(a, x))
    )
    const { error, kernels } = yield* against(splitGpu, g, y, [
      [a, Quant.unsafeQuantize(at, Generators.values(80, K * M))],
      ...(form === "gated" ? [[u, Quant.unsafeQuantize(at, Generators.values(81, K * M))] as const] : []),
      [x, Generators.values(82, K)],
      ...(form === "add" ? [[r, Generators.values(83, M)] as const] : [])
    ])
    const ok = error <= 1e-4 && kernels.includes(`splits=${K / 2048}`) && kernels.includes("mvq8_merge")
    if (!ok) failed++
    console.log(JSON.stringify({ int8Split: { a: at, K, M, form }, kernels, nmse: error, bound: 1e-4, ok }))
  }
  // attention chain's V·P stored permuted into [D, heads, tokens] by the product (permutedResult.ts): the
  // values transposed (f16 [keys, D, KV heads]) times f16 probabilities of 32 heads over 8, against the CPU
  for (const [D, keys, tokens] of only("perm", [[64, 512, 512], [128, 300, 260]] as const)) {
    const g = Graph.make()
    const vt = yield* g.input("vt", "f16", [keys, D, 8])
    const p = yield* g.input("p", "f16", [keys, tokens, 32])
    const y = yield* g.output(Ops.cont(Ops.permute(Ops.mulMat(vt, p), [0, 2, 1, 3])))
    const { error, kernels } = yield* against(gpu, g, y, [
      [vt, Generators.values(102, keys * D * 8)],
      [p, Generators.values(103, keys * tokens * 32)]
    ])
    const ok = error <= 1e-5 && !kernels.includes("cont") && !kernels.includes(" + ")
    if (!ok) failed++
    console.log(JSON.stringify({ permuted: { D, keys, tokens }, kernels, nmse: error, bound: 1e-5, ok }))
  }
  // a prompt's residual sum and norm adding a split-K product's partial sums (splitsIn.ts): a 1B layer's
  // output projection and down projection, an 8B q8_0 output projection (over its f16 copy)
  for (const [at, K, M] of only("sums", [["f16", 2048, 2048], ["f16", 8192, 2048], ["q8_0", 4096, 4096]] as const)) {
    const tokens = 512
    const g = Graph.make()
    const x0 = yield* g.input("x0", "f32", [M, tokens])
    const h = yield* g.input("h", "f32", [K, tokens])
    const w = yield* g.param("w", at, [K, M])
    const wn = yield* g.param("wn", "f32", [M])
    // the sum also read after the norm (the next residual): stored over the stream by the norm
    const x = Ops.add(Ops.scale(x0, 0.5), Ops.mulMat(w, h))
    const y = yield* g.output(Ops.add(x, Ops.mul(Ops.rmsNorm(x, 1e-5), wn)))
    const weights = Generators.values(104, K * M)
    const { error, kernels } = yield* against(gpu, g, y, [
      [x0, Generators.values(105, M * tokens)],
      [h, Generators.values(106, K * tokens)],
      [w, at === "f16" ? weights : Quant.unsafeQuantize(at, weights)],
      [wn, Generators.values(107, M)]
    ])
    const bound = at === "f16" ? 1e-5 : 1e-4
    const ok = error <= bound && !kernels.includes("merge") && kernels.includes("partials=")
    if (!ok) failed++
    console.log(JSON.stringify({ sums: { at, K, M, tokens }, kernels, nmse: error, bound, ok }))
  }
  if (failed > 0) process.exitCode = 1
})

Effect.runPromise(Effect.scoped(program)).catch((e) => {
  console.error(e)
  process.exit(1)
})
