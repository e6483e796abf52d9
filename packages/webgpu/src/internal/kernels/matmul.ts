/**
 * Which mul_mat kernel a product gets, by shape and by what the device offers: matrix-vector for a few
 * columns, subgroup matrices (tensor cores) for f16 where the adapter has 16x16x16 f16->f32 fragments,
 * the register-tiled kernel for operands that load four K at a time, the scalar tiled one elsewhere; a
 * quantized prompt product over an f16 copy of its weights; the form a prompt's gated product takes (the
 * fused products' kernels are in fusedProducts.ts).
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import * as Op from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import * as Int8 from "./int8MatVec.js"
import type { Kernel, KernelTarget, MatrixTile, RegisterTile } from "./kernel.js"
import { WG } from "./kernel.js"
import { halfApplies, halfMatVec, matVec } from "./matvec.js"
import * as Product from "./product.js"
import * as Quantized from "./quantized.js"
import * as Decode from "./quantizedMatVec.js"
import {
  FILL_TILE,
  fillsBetter,
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
 * workgroups, and fewer invocations doing more each run faster there
 * (benchmarks/RESULTS.md: mul_mat f32 on the H200, and lavapipe)
 */
const registersFor = ({ M, N, batches }: Product.Product, software: boolean): RegisterTile => {
  const groups = (bm: number, bn: number) => Math.ceil(M / bm) * Math.ceil(N / bn) * batches
  if (groups(128, 128) >= 256 || (software && M >= 128 && N >= 128)) return { m: 8, n: 8, depth: 8 }
  if (software) return { m: 8, n: 4, depth: 16 }
  if (groups(64, 128) >= 128) return { m: 4, n: 8, depth: 16 }
  return { m: 4, n: 4, depth: 16 }
}

/** a tile in the workgroup order asked for, where it names none of its own */
const inOrder = <T extends { readonly order?: "rows" | "columns" }>(tile: T, order: T["order"]): T =>
  order !== undefined && tile.order === undefined ? { ...tile, order } : tile

/** the register tile a product takes: the one asked for, else by size; in the order asked for, if any */
const registersOf = (product: Product.Product, target: KernelTarget): RegisterTile =>
  inOrder(target.registerTile ?? registersFor(product, target.software === true), target.registerOrder)

/** whether a subgroup-matrix tiling fits the device's workgroup memory and invocations */
const fits = (t: MatrixTile, target: KernelTarget) =>
  sharedBytes(t) <= (target.workgroupStorage ?? 16384) && invocations(t) <= (target.workgroupInvocations ?? 256)

/**
 * a product's subgroup-matrix tiling among those `usable`: the one asked for, else the first that fits, or
 * the small one where the first gives few workgroups that splitting K would not multiply by 4 or more (four
 * splits outran small tiles, two did not: benchmarks/RESULTS.md, choices: products)
 */
const tileFor = (product: Product.Product, target: KernelTarget, usable: (t: MatrixTile) => boolean) => {
  const tile = pickTile(product, target, usable)
  return tile === undefined ? undefined : inOrder(tile, target.matrixOrder)
}

/** tileFor's choice, in no order of its own */
const pickTile = (product: Product.Product, target: KernelTarget, usable: (t: MatrixTile) => boolean) => {
  const ok = (t: MatrixTile) => usable(t) && fits(t, target)
  if (target.matrixTile !== undefined && ok(target.matrixTile)) return target.matrixTile
  const first = MATRIX_TILES.find(ok)
  const few = first !== undefined && gridOf(product, first) < SMALL_GRID && splitsOf(product, first) < 4
  // a product of 64 rows or fewer (attention's P V at head size 64) would leave half the tile's rows empty
  const thin = first !== undefined && 2 * product.M <= first.sgCols * first.fragCols * 16
  if ((few || thin) && ok(SMALL_TILE)) return SMALL_TILE
  const fill = target.fillTiles !== false && first !== undefined && ok(FILL_TILE) && fillsBetter(product, first)
  return fill ? FILL_TILE : first
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
  return target.matrixTile !== undefined
    ? inOrder(target.matrixTile, target.matrixOrder)
    : tileFor(product, target, () => true)
}

/**
 * @internal: whether a product's kernel takes its activations in f16 as well as in f32 (subgroup matrices
 * round them to f16 as they are staged): their producer may then write them in f16
 * (Fusion.Options.halfActivations)
 */
export const takesHalfActivations = (target: KernelTarget) => (node: Tensor.Tensor): boolean =>
  matrixTiling(Product.of(node, undefined), node.src[0], node.src[1], target) !== undefined

/**
 * @internal: a quantized product of this many columns or more copies its weights into f16 first and
 * multiplies the copy as f16 weights (on subgroup matrices, or a GPU's register tiles: copiesForTiles),
 * where its type is among COPY_TYPES: the subgroup-matrix tiles that dequantize as they stage lost more to
 * their decoding than the copy's pass over the weights costs in a model's prompts, q8_0's since the copy
 * came, q4_0's since the copy staged its runs (benchmarks/RESULTS.md, quantized weights)
 */
export const COPY_COLUMNS = 256
const COPY_TYPES: ReadonlySet<DType.DType> = new Set(["q8_0", "q4_0"])

/**
 * a GPU without subgroup matrices (a browser's adapter) copies too: its f16 register tiles outrun the scalar
 * tiles that dequantize as they load (benchmarks/RESULTS.md, the session of 2026-12-06 14:42); a software
 * adapter keeps the tiles, where every pass over the weights costs
 */
const copiesForTiles = (target: KernelTarget) => target.software !== true

/**
 * the largest copy made by default (bytes of f16): a layer's weights (an 8B model's FFN matrices, 117 MB)
 * but not a large vocabulary's head under every prompt position (1 GB at 128256 x 4096)
 */
const COPY_BYTES = 256 * 2 ** 20

/**
 * a quantized product whose weights are copied into f16 first: the weights' operand (`source`), the copy
 * (f16, the source's rows, in the scratch after the result and the f16 product's split partials, at a
 * 256-byte boundary so that its binding starts past theirs) and the f16 product over it; undefined where the tiles dequantize the blocks themselves. A gated
 * prompt product (Product.gated) copies gate's and up's rows as one.
 */
const weightCopy = (node: Tensor.Tensor, target: KernelTarget) => {
  const gated = node.op._tag === "MulMatSwiglu" ? Product.gated(node) : undefined
  if (node.op._tag === "MulMatSwiglu" && gated === undefined) return undefined
  const product = gated ?? Product.of(node, node.op._tag === "MulMatAdd" ? node.src[2] : undefined)
  const source = product.operands.find((o) => o.name === "a")!
  const b = product.operands.find((o) => o.name === "b")!.tensor
  const a = source.tensor
  if (!product.quantized || target.f16 !== true || product.N <= 8 || decodes(product, target)) return undefined
  const rows = (source.extent ?? Tensor.nbytes(a)) / Tensor.nbytes(a)
  const copy = Tensor.unsafeMake(
    `${node.name} (f16 weights)`,
    "f16",
    [a.ne[0], a.ne[1] * rows, a.ne[2], a.ne[3]],
    Op.Op.None(),
    []
  )
  const asked = target.quantizedPrefill
  const wanted = asked === "copy" ||
    (asked === undefined && COPY_TYPES.has(a.dtype) && product.N >= COPY_COLUMNS &&
      Tensor.nbytes(copy) <= COPY_BYTES &&
      (matrixTiling(product, a, b, target) !== undefined || copiesForTiles(target)))
  if (!wanted) return undefined
  const half: Product.Product = {
    ...product,
    quantized: false,
    operands: product.operands.map((o) => o.name === "a" ? { name: "a", tensor: copy } : o)
  }
  const tile = matrixTiling(half, copy, b, target)
  // (a gated product does not split K)
  const partials = tile === undefined || gated !== undefined ? 0 : splitScratch(half, tile)
  const at = Math.ceil((Tensor.nbytes(node) + partials) / 256) * 256
  const within = { tensor: node, at }
  return {
    source,
    copy: { name: "a", tensor: copy, within },
    half: { ...half, operands: half.operands.map((o) => o.name === "a" ? { ...o, within } : o) },
    scratch: at + Tensor.nbytes(copy) - Tensor.nbytes(node)
  }
}

/**
 * @internal: bytes of scratch a product node's kernel keeps after its result: a split-K product's partials
 * (the int8 form's at decode, int8Splits.ts; subgroup matrices'), and a weight copy's f16 weights after them
 */
export const scratchBytes = (node: Tensor.Tensor, target: KernelTarget): number => {
  const [a, b] = node.src
  const shape = { M: node.ne[0], N: node.ne[1], K: a.ne[0], batches: node.ne[2] * node.ne[3] }
  if (node.op._tag === "MulMatSwiglu") {
    if (int8Gated(shape, a, node.src[1], target)) return Int8.int8Scratch(shape, a.dtype, true, target)
    return weightCopy(node, target)?.scratch ?? 0
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
  // f16 weights on subgroup matrices, against f16 or f32 b (a prompt's activations, which the f32
  // register-tiled kernel multiplied at a fraction of the rate; benchmarks/RESULTS.md, history)
  if (matrixTile !== undefined) return subgroupMatrix(product, a, b, matrixTile)
  return Product.fourAligned(product, a, b)
    ? registerTiled(product, registersOf(product, target))
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
      // a's rows staged only when asked: it ran slower than reading blocks in place (benchmarks/RESULTS.md)
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
    return chain(Quantized.halfCopy(copied.source, copied.copy, target))
  }
  if (product.N <= 8) {
    // vec4 loads pay once every thread has a vec4 of K to load (benchmarks/RESULTS.md, choices)
    const vec = matVec(product, target, Product.fourAligned(product, a, b) && product.K >= 4 * WG)
    // f16 weights 16 bytes a load by subgroups, falling back to that where offsets do not allow it
    return halfApplies(product, [a], b, target)
      ? halfMatVec(product, target, { kind: "plain", ...(made !== undefined ? { made } : {}) }, vec)
      : vec
  }
  return plainProduct(product, a, b, target)
}

/**
 * the kernel of a gated product over weights `a` (its gate rows; f16 or f32, or quantized): register tiles
 * of 8 rows a thread, or the scalar tiles; undefined where neither takes it, and where subgroup matrices
 * take the product (a gated form on them ran slower than the product and swiglu apart, and was removed:
 * benchmarks/RESULTS.md)
 */
const gatedForm = (product: Product.Product, a: Tensor.Tensor, b: Tensor.Tensor, target: KernelTarget) => {
  if (target.gatedPrompts === false || matrixTiling(product, a, b, target) !== undefined) return undefined
  if (product.quantized || !Product.fourAligned(product, a, b)) return tiled(product, true)
  const registers = registersOf(product, target)
  return registers.m === 8 ? registerTiled(product, registers, true) : undefined
}

/**
 * @internal: a prompt's mul_mat_swiglu as one gated product (Product.gated), over an f16 copy of quantized
 * weights where a product of theirs would take one; undefined where no gated form computes it
 */
export const gatedPrompt = (node: Tensor.Tensor, target: KernelTarget): Kernel | undefined => {
  const product = Product.gated(node)
  if (product === undefined) return undefined
  const [gate, , b] = node.src
  const copied = weightCopy(node, target)
  if (copied === undefined) return gatedForm(product, gate, b, target)
  const half = gatedForm(copied.half, copied.copy.tensor, b, target)
  if (half === undefined) return undefined
  // each form of the copy (its fallbacks where offsets do not allow a wider one) followed by the product
  const chain = (k: Kernel): Kernel => ({
    ...k,
    next: half,
    ...(k.fallback !== undefined ? { fallback: chain(k.fallback) } : {})
  })
  return chain(Quantized.halfCopy(copied.source, copied.copy, target))
}

/**
 * @internal: whether the int8 form computes a gated FFN's products: both weights of one type (the kernel decodes both
 * as the gate's) that the int8 form takes
 */
export const int8Gated = (
  product: Pick<Product.Product, "N" | "K">,
  gate: Tensor.Tensor,
  up: Tensor.Tensor,
  target: KernelTarget
) => gate.dtype === up.dtype && Int8.int8Applies(product, gate, target) && Int8.int8Applies(product, up, target)

/**
 * @internal: whether the int8 form computes a stack over `weights`: each part's type takes it, and all round b alike
 * (a k-quant model's q4_K and q6_K parts, as llama.cpp's Q4_K_M mixes them)
 */
export const int8Stack = (
  product: Pick<Product.Product, "N" | "K">,
  weights: ReadonlyArray<Tensor.Tensor>,
  target: KernelTarget
) => weights.every((w) => Int8.int8Applies(product, w, target)) && Int8.roundsAlike(weights.map((w) => w.dtype))
