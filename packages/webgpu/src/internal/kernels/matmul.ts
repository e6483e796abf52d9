/**
 * Which mul_mat kernel a product gets, by shape and by what the device offers: matrix-vector for a few
 * columns, subgroup matrices (tensor cores) for f16 where the adapter has 16x16x16 f16->f32 fragments,
 * the register-tiled kernel for operands that load four K at a time, the scalar tiled one elsewhere.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import * as Op from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import * as Int8 from "./int8MatVec.js"
import type { Kernel, KernelTarget, MatrixTile, Operand, RegisterTile } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, u32, WG } from "./kernel.js"
import { halfApplies, halfMatVec, matVec } from "./matvec.js"
import { leavesNorm } from "./normIn.js"
import * as Product from "./product.js"
import * as Quantized from "./quantized.js"
import * as Decode from "./quantizedMatVec.js"
import type { RowStores } from "./stackStores.js"
import {
  gridOf,
  invocations,
  MATRIX_TILES,
  quantizedSubgroupMatrix,
  sharedBytes,
  SMALL_GRID,
  SMALL_TILE,
  splitScratch,
  splitsOf,
  stagesBlocks,
  subgroupMatrix
} from "./subgroupMatrix.js"
import { registerTiled, tiled } from "./tiled.js"

/**
 * The register tile by how many workgroups it gives: 8x8 per thread (128x128 per workgroup) once there
 * are enough of those to fill the device twice, smaller tiles for smaller products. On a software adapter
 * the biggest tile wherever the result has 128 rows and columns, 8x4 elsewhere: its few cores need few
 * workgroups, and fewer invocations doing more each ran lavapipe's products 1.8-2.5x faster.
 * (benchmarks/RESULTS.md: mul_mat f32 on the H200, and lavapipe)
 */
const registersFor = ({ M, N, batches }: Product.Product, software: boolean): RegisterTile => {
  const groups = (bm: number, bn: number) => Math.ceil(M / bm) * Math.ceil(N / bn) * batches
  if (groups(128, 128) >= 256 || (software && M >= 128 && N >= 128)) return { m: 8, n: 8, depth: 8 }
  if (software) return { m: 8, n: 4, depth: 16 }
  if (groups(64, 128) >= 128) return { m: 4, n: 8, depth: 16 }
  return { m: 4, n: 4, depth: 16 }
}

/** whether a subgroup-matrix tiling fits the device's workgroup memory and invocations */
const fits = (t: MatrixTile, target: KernelTarget) =>
  sharedBytes(t) <= (target.workgroupStorage ?? 16384) && invocations(t) <= (target.workgroupInvocations ?? 256)

/** a tiling that splits K for a product with a bias too, where the target asks (splitsWithBias) */
const withBias = (t: MatrixTile, target: KernelTarget): MatrixTile =>
  target.splitsWithBias === true ? { ...t, biasSplits: true } : t

/**
 * a product's subgroup-matrix tiling among those `usable`: the one asked for, else the first that fits, or
 * the small one where the first gives few workgroups that splitting K would not multiply by 4 or more (H200:
 * a 2048 x 2048 product against 512 columns ran 1.3x faster in 4 splits than in small tiles, a 3072 x
 * 2048 f16 one 1.3x slower in 2; benchmarks/RESULTS.md)
 */
const tileFor = (product: Product.Product, target: KernelTarget, usable: (t: MatrixTile) => boolean) => {
  const ok = (t: MatrixTile) => usable(t) && fits(t, target)
  if (target.matrixTile !== undefined && ok(target.matrixTile)) return withBias(target.matrixTile, target)
  const found = MATRIX_TILES.find(ok)
  const first = found === undefined ? undefined : withBias(found, target)
  const few = first !== undefined && gridOf(product, first) < SMALL_GRID && splitsOf(product, first) < 4
  // a product of 64 rows or fewer (attention's P V at head size 64) would leave half the tile's rows empty
  const thin = first !== undefined && 2 * product.M <= first.sgCols * first.fragCols * 16
  return (few || thin) && ok(SMALL_TILE) ? withBias(SMALL_TILE, target) : first
}

/** the quantized matrix-vector kernel's shape on a target */
const decodeShape = (target: KernelTarget) =>
  target.quantizedDecode ??
    // a software adapter compiles it for seconds per column: one column, one row per group of lanes
    (target.software === true ? { rows: 1, columns: 1, stage: 1 } : { rows: 2, columns: 8 })

/** whether a quantized product takes the matrix-vector kernel: a few columns whose chunk of b fits */
const decodes = (product: Product.Product, target: KernelTarget) =>
  product.N <= decodeShape(target).columns && Decode.sharedBytes(product.N) <= (target.workgroupStorage ?? 16384)

/**
 * the subgroup-matrix tiling a product takes, or undefined where another kernel computes it: quantized
 * weights past the matrix-vector kernel's columns (blocks dequantized into f16 tiles), f16 weights past 8
 * columns; against f32 or f16 b contiguous along K
 */
const matrixTiling = (product: Product.Product, a: Tensor.Tensor, b: Tensor.Tensor, target: KernelTarget) => {
  if (target.subgroupMatrix !== true || product.N <= 8) return undefined
  if ((b.dtype !== "f32" && b.dtype !== "f16") || b.nb[0] !== DType.typeSize(b.dtype)) return undefined
  if (product.quantized) return decodes(product, target) ? undefined : tileFor(product, target, stagesBlocks)
  if (a.dtype !== "f16" || a.nb[0] !== 2) return undefined
  return target.matrixTile !== undefined ? withBias(target.matrixTile, target) : tileFor(product, target, () => true)
}

/**
 * @internal: whether a product's kernel takes its activations in f16 as well as in f32 (subgroup matrices
 * round them to f16 as they are staged): their producer may then write them in f16
 * (Fusion.Options.halfActivations)
 */
export const takesHalfActivations = (target: KernelTarget) => (node: Tensor.Tensor): boolean =>
  matrixTiling(Product.of(node, undefined), node.src[0], node.src[1], target) !== undefined

/**
 * @internal: a quantized product on subgroup matrices of this many columns or more copies its weights into
 * f16 first and multiplies the copy as f16 weights, where its type is among COPY_TYPES: the tiles that
 * dequantize as they stage lost more to their decoding than the copy's pass over the weights costs in a
 * model's prompts, q8_0's since the copy came, q4_0's since the copy staged its runs (benchmarks/RESULTS.md,
 * quantized weights)
 */
export const COPY_COLUMNS = 256
const COPY_TYPES: ReadonlySet<DType.DType> = new Set(["q8_0", "q4_0"])

/**
 * the largest copy made by default (bytes of f16): a layer's weights (an 8B model's FFN matrices, 117 MB)
 * but not a large vocabulary's head under every prompt position (1 GB at 128256 x 4096)
 */
const COPY_BYTES = 256 * 2 ** 20

/** a stand-in tensor for a buffer the program binds */
const stage = (n: number) => Tensor.unsafeMake(`weight copy stage ${n}`, "f16", [1, 1, 1, 1], Op.Op.None(), [])

/**
 * @internal: stand-ins for the two buffers a plan's weight copies alternate between where they run ahead of
 * their products (KernelTarget.copiesAhead; copiesAhead.ts): the program binds them to buffers of its own
 * as large as the largest copy, each copied product's kernels to one of them in turn
 */
export const COPY_STAGES = [stage(0), stage(1)] as const

/**
 * a quantized product whose weights are copied into f16 first: the copy (f16, a's shape, in the scratch
 * after the result and the f16 product's split partials, at a 256-byte boundary so that its binding starts
 * past theirs; in the first of COPY_STAGES where copies run ahead) and the f16 product over it; undefined
 * where the tiles dequantize the blocks themselves
 */
const weightCopy = (node: Tensor.Tensor, target: KernelTarget) => {
  const [a, b] = node.src
  const product = Product.of(node, node.op._tag === "MulMatAdd" ? node.src[2] : undefined)
  if (!product.quantized || target.f16 !== true || product.N <= 8 || decodes(product, target)) return undefined
  const asked = target.quantizedPrefill
  const wanted = asked === "copy" ||
    (asked === undefined && COPY_TYPES.has(a.dtype) && product.N >= COPY_COLUMNS &&
      2 * Tensor.nelements(a) <= COPY_BYTES && matrixTiling(product, a, b, target) !== undefined)
  if (!wanted) return undefined
  const copy = Tensor.unsafeMake(`${node.name} (f16 weights)`, "f16", a.ne, Op.Op.None(), [])
  const half: Product.Product = {
    ...product,
    quantized: false,
    operands: product.operands.map((o) => o.name === "a" ? { name: "a", tensor: copy } : o)
  }
  const tile = matrixTiling(half, copy, b, target)
  const partials = tile === undefined ? 0 : splitScratch(half, tile)
  const at = Math.ceil((Tensor.nbytes(node) + partials) / 256) * 256
  const ahead = target.copiesAhead === true
  const within = ahead ? { tensor: COPY_STAGES[0], at: 0 } : { tensor: node, at }
  return {
    copy: { name: "a", tensor: copy, within },
    half: { ...half, operands: half.operands.map((o) => o.name === "a" ? { ...o, within } : o) },
    scratch: ahead ? partials : at + Tensor.nbytes(copy) - Tensor.nbytes(node)
  }
}

/**
 * @internal: the f16 copy of a quantized prompt product's weights as a dispatch before it makes it (a side
 * job, sideJob.ts; KernelTarget.copiesAhead), at that dispatch's workgroup size `size`; undefined where the
 * product copies none
 */
export const copyJob = (
  node: Tensor.Tensor,
  target: KernelTarget,
  size: number,
  within: Operand["within"]
): Kernel | undefined => {
  const copied = weightCopy(node, target)
  return copied === undefined || within === undefined
    ? undefined
    : Quantized.halfCopy(node.src[0], { ...copied.copy, within }, target, true, target.copyLoads ?? "words", size)
}

/** @internal: the bytes of a quantized prompt product's f16 copy of its weights (0 where it makes none) */
export const copyBytes = (node: Tensor.Tensor, target: KernelTarget): number => {
  const copied = (node.op._tag === "MulMat" || node.op._tag === "MulMatAdd") ? weightCopy(node, target) : undefined
  return copied === undefined ? 0 : Tensor.nbytes(copied.copy.tensor)
}

/**
 * @internal: bytes of scratch a product node's kernel keeps after its result: a split-K product's partials
 * (the int8 form's at decode, int8Splits.ts; subgroup matrices'), and a weight copy's f16 weights after them
 */
export const scratchBytes = (node: Tensor.Tensor, target: KernelTarget): number => {
  const [a, b] = node.src
  const shape = { M: node.ne[0], N: node.ne[1], K: a.ne[0], batches: node.ne[2] * node.ne[3] }
  if (node.op._tag === "MulMatSwiglu") {
    return int8Gated(shape, a, node.src[1], target) ? Int8.int8Scratch(shape, a.dtype, true, target) : 0
  }
  if (node.op._tag === "MulMatStack") {
    return int8Stack(shape, node.src.slice(0, node.op.parts), target)
      ? Int8.int8Scratch(shape, a.dtype, false, target)
      : 0
  }
  const product = Product.of(node, node.op._tag === "MulMatAdd" ? node.src[2] : undefined)
  if (product.quantized && decodes(product, target)) {
    const int8 = decodeShape(target).int8 !== false && Int8.int8Applies(product, a, target)
    return int8 ? Int8.int8Scratch(product, a.dtype, false, target) : 0
  }
  const copied = weightCopy(node, target)
  if (copied !== undefined) return copied.scratch
  const tile = matrixTiling(product, a, b, target)
  return tile === undefined ? 0 : splitScratch(product, tile)
}

/** the kernel of an f16 or f32 product past the matrix-vector kernel's columns */
const plainProduct = (product: Product.Product, a: Tensor.Tensor, b: Tensor.Tensor, target: KernelTarget) => {
  const matrixTile = matrixTiling(product, a, b, target)
  // f16 weights on subgroup matrices, against f16 or f32 b (a prompt's activations: a 1B f16 prompt spent 38
  // of its 41 ms in the f32 register-tiled kernel; benchmarks/RESULTS.md)
  if (matrixTile !== undefined) return subgroupMatrix(product, a, b, matrixTile)
  return Product.fourAligned(product, a, b)
    ? registerTiled(product, target.registerTile ?? registersFor(product, target.software === true))
    : tiled(product)
}

/** @internal: the kernel of mul_mat (`bias` undefined) or of mul_mat_add */
export const mulMat = (
  node: Tensor.Tensor,
  target: KernelTarget,
  bias: Tensor.Tensor | undefined,
  made?: Product.MadeB
): Kernel => {
  const [a, b] = node.src
  const product = Product.of(node, bias)
  if (product.quantized) {
    // quantized weights, read in place: whole words of blocks for a few columns where b's chunk fits the
    // workgroup memory, else dequantized element by element
    const decode = decodeShape(target)
    const storage = target.workgroupStorage ?? 16384
    if (decodes(product, target)) {
      // a's rows staged only when asked: on the H200 it ran slower than reading blocks in place (run bd)
      const staged = decode.staged === true
        ? Decode.stagedChunks(a, product.N, decode.rows, storage)
        : undefined
      const f32Form = staged !== undefined
        ? Decode.quantizedMatVec(product, a.dtype as DType.Quantized, target, decode.rows, staged, true)
        : Decode.quantizedMatVec(
          product,
          a.dtype as DType.Quantized,
          target,
          decode.rows,
          decode.stage ?? Decode.stageFor(product.N, product.K, storage)
        )
      // q4_0 and q8_0 against b rounded to q8_0, as ggml's CPU computes them, with int8 dot products
      return decode.int8 !== false && Int8.int8Applies(product, a, target)
        ? Int8.int8MatVec(product, b, a.dtype as Int8.Int8Type, target, f32Form, {
          kind: "plain",
          ...(made !== undefined ? { made } : {})
        })
        : f32Form
    }
    if (product.N <= 8) return matVec(product, target, false)
    // prefill: blocks dequantized into f16 tiles on subgroup matrices where the device has them
    const matrixTile = matrixTiling(product, a, b, target)
    const tiles = matrixTile
      ? quantizedSubgroupMatrix(product, a.dtype as DType.Quantized, b, matrixTile)
      : tiled(product)
    // for many columns, the weights copied into f16 first (in the scratch) and multiplied as f16 weights;
    // the tiles where the scratch does not fit
    const copied = weightCopy(node, target)
    if (copied === undefined) return tiles
    const halfKernel = plainProduct(copied.half, copied.copy.tensor, b, target)
    // each form of the copy (its fallbacks where offsets do not allow a wider one) followed by the product,
    // the tiles last
    const chain = (k: Kernel | undefined): Kernel =>
      k === undefined ? tiles : { ...k, next: halfKernel, fallback: chain(k.fallback) }
    return chain(Quantized.halfCopy(a, copied.copy, target))
  }
  if (product.N <= 8) {
    // vec4 loads pay once every thread has a vec4 of K to load (on lavapipe, K = 256 ran 6% slower)
    const vec = matVec(product, target, Product.fourAligned(product, a, b) && product.K >= 4 * WG)
    // f16 weights 16 bytes a load by subgroups, falling back to that where offsets do not allow it
    return halfApplies(product, [a], b, target)
      ? halfMatVec(product, target, { kind: "plain", ...(made !== undefined ? { made } : {}) }, vec)
      : vec
  }
  return plainProduct(product, a, b, target)
}

/** WGSL: the value at k of row `m` of weight operand `n` (blocks dequantized where quantized) */
const valueAt = (product: Product.Product, n: string, m: string) =>
  product.quantized
    ? `ldq_${n}(ix_${n}(0u, ${m}, b2 / P.r2, b3 / P.r3), k)`
    : `ld_${n}(ix_${n}(k, ${m}, b2 / P.r2, b3 / P.r3))`

/**
 * a workgroup per result (m, n) of a fused product: `prelude` runs first (after module-scope `decls`), each
 * of `terms` (a's value at k, WGSL) sums term * b over K into r0, r1, ... (reduced over the workgroup), and
 * `result` combines them
 */
const perResult = (
  variant: KernelSpec.Variant,
  product: Product.Product,
  target: KernelTarget,
  decls: string,
  prelude: string,
  terms: ReadonlyArray<string>,
  result: string
): Kernel =>
  KernelSpec.make({
    variant,
    operands: product.operands,
    params: product.params,
    workgroups: fold(product.M * product.N * product.batches, target.maxWorkgroups),
    main: `
${decls}
${terms.map((_, i) => `var<workgroup> r${i}: array<f32, 64>;`).join("\n")}
${entry(64)}
  let t = wg_linear(wid, nwg);
  if (t >= P.d_ne0 * P.d_ne1 * P.d_ne2 * P.d_ne3) { return; }
  let m = t % P.d_ne0;
  let n = (t / P.d_ne0) % P.d_ne1;
  let bz = t / (P.d_ne0 * P.d_ne1);
  let b2 = bz % P.d_ne2;
  let b3 = bz / P.d_ne2;
${prelude}
${terms.map((_, i) => `  var s${i} = 0.0;`).join("\n")}
  for (var k = lid; k < P.a_ne0; k += 64u) {
    let x = ld_b(ix_b(k, n, b2, b3));
${terms.map((term, i) => `    s${i} += ${term} * x;`).join("\n")}
  }
${terms.map((_, i) => `  r${i}[lid] = s${i};`).join("\n")}
  workgroupBarrier();
  for (var w = 32u; w > 0u; w >>= 1u) {
    if (lid < w) { ${terms.map((_, i) => `r${i}[lid] += r${i}[lid + w];`).join(" ")} }
    workgroupBarrier();
  }
  if (lid == 0u) { st_d(ix_d(m, n, b2, b3), ${result}); }
}`
  })

/**
 * @internal: mul_mat_swiglu, silu(gate b) * (up b): the int8 form with both weights where it applies (the
 * only place the WebGPU device asks for the fusion), else a workgroup per result summing both rows
 */
export const mulMatSwiglu = (node: Tensor.Tensor, target: KernelTarget, made?: Product.MadeB): Kernel => {
  const [gate, up, b] = node.src
  const product: Product.Product = {
    operands: [{ name: "a", tensor: gate }, { name: "u", tensor: up }, { name: "b", tensor: b }, {
      name: "d",
      tensor: node
    }],
    quantized: DType.isQuantized(gate.dtype),
    bias: false,
    epilogue: "",
    M: node.ne[0],
    N: node.ne[1],
    K: gate.ne[0],
    batches: node.ne[2] * node.ne[3],
    params: [u32("r2", b.ne[2] / gate.ne[2]), u32("r3", b.ne[3] / gate.ne[3])]
  }
  const row = (n: string) => valueAt(product, n, "m")
  const rows = perResult(
    { family: "mul_mat_swiglu_rows" },
    product,
    target,
    "",
    "",
    [row("a"), row("u")],
    "silu_s(r0[0]) * r1[0]"
  )
  if (int8Gated(product, gate, up, target)) {
    return Int8.int8MatVec(product, b, gate.dtype as Int8.Int8Type, target, rows, {
      kind: "gated",
      ...(made !== undefined ? { made } : {})
    })
  }
  const vec = vectorForm(product, [gate, up], b) ? matVec(product, target, true, { kind: "gated" }, rows) : rows
  return halfApplies(product, [gate, up], b, target)
    ? halfMatVec(product, target, { kind: "gated", ...(made !== undefined ? { made } : {}) }, vec)
    : vec
}

/**
 * whether the int8 form computes a gated FFN's products: both weights of one type (the kernel decodes both
 * as the gate's) that the int8 form takes
 */
const int8Gated = (
  product: Pick<Product.Product, "N" | "K">,
  gate: Tensor.Tensor,
  up: Tensor.Tensor,
  target: KernelTarget
) => gate.dtype === up.dtype && Int8.int8Applies(product, gate, target) && Int8.int8Applies(product, up, target)

/**
 * whether the vec4 matrix-vector form computes a fused product over `weights` (f16 or f32, a few columns,
 * K a multiple of 4 and long enough for every thread's vec4, rows at whole vec4)
 */
const vectorForm = (
  product: Pick<Product.Product, "N" | "K">,
  weights: ReadonlyArray<Tensor.Tensor>,
  b: Tensor.Tensor
) =>
  product.N <= 8 && product.K >= 4 * WG && (b.dtype === "f32" || b.dtype === "f16") &&
  weights.every((w) =>
    (w.dtype === "f16" || w.dtype === "f32") && w.dtype === weights[0].dtype &&
    Product.fourAligned({ ...product, K: w.ne[0] } as Product.Product, w, b)
  )

/**
 * @internal: whether the WebGPU device fuses a gated FFN's products: where the int8 form computes them, or
 * the vec4 matrix-vector form (f16 and f32 weights)
 */
export const fusesSwiglu = (target: KernelTarget) => (gate: Tensor.Tensor, up: Tensor.Tensor, b: Tensor.Tensor) =>
  int8Gated({ N: b.ne[1], K: gate.ne[0] }, gate, up, target) ||
  vectorForm({ N: b.ne[1], K: gate.ne[0] }, [gate, up], b) ||
  (Tensor.sameShape(gate, up) && halfApplies({ N: b.ne[1], K: gate.ne[0] }, [gate, up], b, target))

/**
 * @internal: mul_mat_stack, the products of several weights with one b, rows stacked: the int8 form where
 * every part's weights allow it (the only place the WebGPU device asks for the fusion), else a workgroup
 * per result; `stores` the int8 form or the f16 one by subgroups also makes of its rows (stackStores.ts),
 * where it is the one taken
 */
export const mulMatStack = (
  node: Tensor.Tensor,
  parts: number,
  target: KernelTarget,
  stores?: RowStores,
  made?: Product.MadeB
): Kernel => {
  const weights = node.src.slice(0, parts)
  const b = node.src[parts]
  const names = weights.map((_, i) => (i === 0 ? "a" : `a${i}`))
  const starts = weights.map((_, i) => weights.slice(0, i).reduce((m, w) => m + w.ne[1], 0))
  const product: Product.Product = {
    operands: [...weights.map((w, i) => ({ name: names[i], tensor: w })), { name: "b", tensor: b }, {
      name: "d",
      tensor: node
    }],
    quantized: DType.isQuantized(weights[0].dtype),
    bias: false,
    epilogue: "",
    M: node.ne[0],
    N: node.ne[1],
    K: weights[0].ne[0],
    batches: node.ne[2] * node.ne[3],
    params: [
      u32("r2", b.ne[2] / weights[0].ne[2]),
      u32("r3", b.ne[3] / weights[0].ne[3]),
      ...starts.slice(1).map((s, i) => u32(`s${i + 1}`, s))
    ]
  }
  const row = (n: string) => valueAt(product, n, "lr")
  // the row's part (its weights) and its row within the part
  const decls = `fn part_row(pt: u32, lr: u32, k: u32, b2: u32, b3: u32) -> f32 {
${names.map((nm, i) => `  if (pt == ${i}u) { return ${row(nm)}; }`).join("\n")}
  return 0.0;
}`
  const prelude = `  var pt = 0u;
  var lr = m;
${range(parts - 1).map((i) => `  if (m >= P.s${i + 1}) { pt = ${i + 1}u; lr = m - P.s${i + 1}; }`).join("\n")}`
  const rows = perResult({ family: "mul_mat_stack_rows", parts }, product, target, decls, prelude, [
    "part_row(pt, lr, k, b2, b3)"
  ], "r0[0]")
  if (int8Stack(product, weights, target)) {
    const types = weights.map((w) => w.dtype as Int8.Int8Type)
    return Int8.int8MatVec(product, b, types[0], target, rows, {
      kind: "stack",
      parts,
      starts,
      ...(types.some((t) => t !== types[0]) ? { types } : {}),
      ...(stores !== undefined ? { stores } : {}),
      ...(made !== undefined ? { made } : {})
    })
  }
  const vec = vectorForm(product, weights, b) ? matVec(product, target, true, { kind: "stack", parts }, rows) : rows
  return halfApplies(product, weights, b, target)
    ? halfMatVec(product, target, {
      kind: "stack",
      parts,
      ...(stores !== undefined ? { stores } : {}),
      ...(made !== undefined ? { made } : {})
    }, vec)
    : vec
}

/**
 * @internal: whether the WebGPU device stacks products sharing their activations: where the int8 form
 * computes every part (types that round b alike, one column) or the vec4 matrix-vector form does (f16 and
 * f32 weights of one type), for at most 4 parts (operands of a binding group)
 */
export const stacks = (target: KernelTarget) => (weights: ReadonlyArray<Tensor.Tensor>, b: Tensor.Tensor) =>
  weights.length <= 4 &&
  weights.every((w) => w.ne[0] === weights[0].ne[0] && w.ne[2] === 1 && w.ne[3] === 1) &&
  (int8Stack({ N: b.ne[1], K: weights[0].ne[0] }, weights, target) ||
    (weights.every((w) => w.dtype === weights[0].dtype) &&
      (vectorForm({ N: b.ne[1], K: weights[0].ne[0] }, weights, b) ||
        halfApplies({ N: b.ne[1], K: weights[0].ne[0] }, weights, b, target))))

/**
 * whether the int8 form computes a stack over `weights`: each part's type takes it, and all round b alike
 * (a k-quant model's q4_K and q6_K parts, as llama.cpp's Q4_K_M mixes them)
 */
const int8Stack = (
  product: Pick<Product.Product, "N" | "K">,
  weights: ReadonlyArray<Tensor.Tensor>,
  target: KernelTarget
) => weights.every((w) => Int8.int8Applies(product, w, target)) && Int8.roundsAlike(weights.map((w) => w.dtype))

/**
 * @internal: whether the WebGPU device leaves a one-row norm to the products that read it (normIn.ts): each
 * of them one the int8 form or f16 weights by subgroups compute
 */
export const leavesNorms = (target: KernelTarget) =>
  leavesNorm(target, (weights, b) => {
    const product = { N: b.ne[1], K: weights.ne[0] }
    return Int8.int8Applies(product, weights, target) || halfApplies(product, [weights], b, target)
  })
