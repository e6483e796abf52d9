/**
 * Which mul_mat kernel a product gets, by shape and by what the device offers: matrix-vector for a few
 * columns, subgroup matrices (tensor cores) for f16 where the adapter has 16x16x16 f16->f32 fragments,
 * the register-tiled kernel for operands that load four K at a time, the scalar tiled one elsewhere.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import type * as Tensor from "@effect-gpu/core/Tensor"
import type { Kernel, KernelTarget, MatrixTile, RegisterTile } from "./kernel.js"
import { WG } from "./kernel.js"
import { matVec } from "./matvec.js"
import * as Product from "./product.js"
import * as Decode from "./quantizedMatVec.js"
import {
  invocations,
  MATRIX_TILES,
  quantizedSubgroupMatrix,
  sharedBytes,
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

/** @internal: the kernel of mul_mat (`bias` undefined) or of mul_mat_add */
export const mulMat = (node: Tensor.Tensor, target: KernelTarget, bias: Tensor.Tensor | undefined): Kernel => {
  const [a, b] = node.src
  const product = Product.of(node, bias)
  if (product.quantized) {
    // quantized weights, read in place: whole words of blocks for a few columns where b's chunk fits the
    // workgroup memory, else dequantized element by element
    // (a software adapter compiles it for seconds per column: one column, one row per group of lanes)
    const decode = target.quantizedDecode ??
      (target.software === true ? { rows: 1, columns: 1, stage: 1 } : { rows: 2, columns: 8 })
    const storage = target.workgroupStorage ?? 16384
    if (product.N <= decode.columns && Decode.sharedBytes(product.N) <= storage) {
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
      return decode.int8 !== false && Decode.int8Applies(product, a, target)
        ? Decode.int8MatVec(product, b, a.dtype as "q4_0" | "q8_0", target, f32Form)
        : f32Form
    }
    if (product.N <= 8) return matVec(product, target, false)
    // prefill: blocks dequantized into f16 tiles on subgroup matrices where the device has them
    const staged = target.subgroupMatrix === true && (b.dtype === "f32" || b.dtype === "f16") &&
        b.nb[0] === DType.typeSize(b.dtype)
      ? [...(target.matrixTile ? [target.matrixTile] : []), ...MATRIX_TILES].find((t) =>
        stagesBlocks(t) && fits(t, target)
      )
      : undefined
    return staged ? quantizedSubgroupMatrix(product, a.dtype as DType.Quantized, b, staged) : tiled(product)
  }
  if (product.N <= 8) {
    // vec4 loads pay once every thread has a vec4 of K to load (on lavapipe, K = 256 ran 6% slower)
    return matVec(product, target, Product.fourAligned(product, a, b) && product.K >= 4 * WG)
  }
  const matrixTile = target.matrixTile ?? MATRIX_TILES.find((t) => fits(t, target))
  if (
    target.subgroupMatrix === true && matrixTile !== undefined && a.dtype === "f16" && b.dtype === "f16" &&
    a.nb[0] === 2 && b.nb[0] === 2
  ) {
    return subgroupMatrix(product, a, b, matrixTile)
  }
  return Product.fourAligned(product, a, b)
    ? registerTiled(product, target.registerTile ?? registersFor(product, target.software === true))
    : tiled(product)
}
