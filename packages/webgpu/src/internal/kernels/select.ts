/**
 * The dispatcher: which family's kernel computes a node, and whether one exists (answered from the op
 * and its types alone, without generating WGSL).
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import * as Op from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { flashAttnExt, scratchBytes as attentionScratch } from "./attention.js"
import * as Elementwise from "./elementwise.js"
import * as Experts from "./experts.js"
import { mulMatStack, mulMatSwiglu } from "./fusedProducts.js"
import * as Indexing from "./indexing.js"
import type { Kernel, KernelTarget } from "./kernel.js"
import { mulMat, scratchBytes as mulMatScratch } from "./matmul.js"
import { mulMatPermuted } from "./permutedResult.js"
import * as Quantized from "./quantized.js"
import { rope, ropeSetRows } from "./rope.js"
import * as Rows from "./rows.js"
import { rank } from "./sort.js"

/** @internal: the kernel for a node, or undefined for nodes that run nothing (leafs and views) */
export const kernelFor = (node: Tensor.Tensor, target: KernelTarget): Kernel | undefined => {
  const op = node.op
  switch (op._tag) {
    case "Add":
    case "Sub":
    case "Mul":
    case "Div":
      return Elementwise.binary(node, target)
    case "Scale":
    case "Sqr":
    case "Sqrt":
    case "Exp":
    case "Log":
    case "Clamp":
    case "Cpy":
    case "Cont":
      if (DType.isQuantized(node.src[0].dtype)) return Quantized.dequantize(node, target)
      if (DType.isQuantized(node.dtype)) return Quantized.quantize(node, target)
      return Elementwise.unary(node, op, target)
    case "Unary":
      return Elementwise.unary(node, op, target)
    case "Concat":
      return Elementwise.concat(node, op.dim, target)
    case "Pad":
      return Elementwise.pad(node, target)
    case "Repeat":
      return Elementwise.repeat(node, target)
    case "DiagMaskInf":
      return Elementwise.diagMaskInf(node, op.nPast, target)
    case "Glu":
      return Elementwise.glu(node, op, target)
    case "GetRows":
      return DType.isQuantized(node.src[0].dtype)
        ? Quantized.getRows(node, target)
        : Indexing.getRows(node, target)
    case "SetRows":
      return Indexing.setRows(node, target)
    case "Rope":
      return rope(node, op, target)
    case "RopeSetRows":
      return ropeSetRows(node, op, target)
    case "RopeSetRowsKv":
      return ropeSetRows(node, op, target, true)
    case "MulMat":
      return mulMat(node, target, undefined)
    case "MulMatAdd":
      return mulMat(node, target, node.src[2])
    case "MulMatSwiglu":
      return mulMatSwiglu(node, target)
    case "MulMatPermuted":
      return mulMatPermuted(node, target)
    case "MulMatStack":
      return mulMatStack(node, op.parts, target)
    case "SoftMax":
      return Rows.softMax(node, op, target)
    case "RmsNorm":
      return Rows.rmsNorm(node, op.eps, false, false, target)
    case "RmsNormMul":
      return Rows.rmsNorm(node, op.eps, false, true, target)
    case "AddRmsNorm":
      return Rows.rmsNorm(node, op.eps, true, op.withMul, target)
    case "AddRmsNormKeep":
      return Rows.rmsNorm(node, op.eps, true, op.withMul, target, "beside")
    case "AddRmsNormStore":
      return Rows.rmsNorm(node, op.eps, true, op.withMul, target, "over")
    case "Norm":
      return Rows.norm(node, op.eps, target)
    case "SumRows":
    case "Mean":
      return Rows.sumRows(node, op._tag === "Mean", target)
    case "Argmax":
      return Rows.argmax(node, target)
    case "Cumsum":
      return Rows.cumsum(node, target)
    case "Sum":
      return Rows.sum(node)
    case "Argsort":
    case "TopK":
      return rank(node, op, target)
    case "None":
    case "View":
    case "Reshape":
    case "Permute":
    case "Transpose":
      return undefined
    case "L2Norm":
      return Rows.l2Norm(node, op.eps, target)
    case "GroupNorm":
      return Rows.groupNorm(node, op.nGroups, op.eps, target)
    case "FlashAttnExt":
    case "RopeFlashAttnExt":
      return flashAttnExt(node, op, target)
    case "MulMatId":
      return Experts.mulMatId(node, target)
    case "AddId":
      return Experts.addId(node, target)
    default:
      return unreachable(op)
  }
}

const unreachable = (op: never): never => {
  throw new Error(`webgpu: no kernel for ${(op as Op.Op)._tag}`)
}

/**
 * @internal: the bytes of scratch a node's kernel keeps after its result: split attention's and split-K
 * products' partial results
 */
export const scratchBytes = (node: Tensor.Tensor, target: KernelTarget): number =>
  node.op._tag === "FlashAttnExt" || node.op._tag === "RopeFlashAttnExt"
    ? attentionScratch(node, target)
    : node.op._tag === "MulMat" || node.op._tag === "MulMatAdd" || node.op._tag === "MulMatSwiglu" ||
        node.op._tag === "MulMatStack"
    ? mulMatScratch(node, target)
    : 0

/** the largest head size of flash_attn_ext: q's row is kept in workgroup memory */
const MAX_HEAD = 1024

/**
 * @internal: whether the target has a kernel for a node with these types and sizes: every op that is
 * not a view has one (`kernelFor` covers the whole union), for f32, f16 (where the device has shader-f16)
 * and i32 operands whose strides are whole elements and that fit a binding
 */
export const supports = (node: Tensor.Tensor, target: KernelTarget, maxBinding: number): boolean => {
  if (Op.isView(node.op) || node.op._tag === "None") return true
  const attention = node.op._tag === "FlashAttnExt" || node.op._tag === "RopeFlashAttnExt"
  if (attention && (node.src[0].ne[0] > MAX_HEAD || node.src[2].ne[0] > MAX_HEAD)) return false
  // a rotated q: modes 0 and 2 only (the multi-section modes take four positions a token)
  if (node.op._tag === "RopeFlashAttnExt" && node.op.rope.mode !== 0 && node.op.rope.mode !== 2) return false
  // quantized operands only where the op reads blocks; a quantized result only from f32 into q8_0 / q4_0
  if (DType.isQuantized(node.dtype)) {
    const from = node.src[0].dtype
    if (!((node.op._tag === "Cpy" || node.op._tag === "Cont") && Quantized.quantizes(from, node.dtype))) return false
  }
  for (const [i, s] of node.src.entries()) {
    if (DType.isQuantized(s.dtype) && !Op.readsQuantized(node.op, i)) return false
  }
  if ((node.op._tag === "Cpy" || node.op._tag === "Cont") && DType.isQuantized(node.src[0].dtype)) {
    if (node.dtype !== "f32") return false
  }
  for (const t of [node, ...node.src]) {
    if (t.dtype === "f16" && !target.f16) return false
    if (Tensor.nbytes(t) > maxBinding) return false
    if (!DType.isQuantized(t.dtype) && t.nb.some((n) => n % DType.typeSize(t.dtype) !== 0)) return false
  }
  if (
    node.op._tag === "MulMat" || node.op._tag === "MulMatAdd" || node.op._tag === "MulMatSwiglu" ||
    node.op._tag === "MulMatStack" || node.op._tag === "MulMatPermuted"
  ) {
    if (node.src.some((s) => s.dtype === "i32")) return false
  }
  return true
}
