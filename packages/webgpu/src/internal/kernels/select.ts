/**
 * The dispatcher: which family's kernel computes a node, and whether one exists (answered from the op
 * and its types alone, without generating WGSL).
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import * as Op from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import * as Elementwise from "./elementwise.js"
import * as Indexing from "./indexing.js"
import type { Kernel, KernelTarget } from "./kernel.js"
import { mulMat } from "./matmul.js"
import { rope } from "./rope.js"
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
      return Indexing.getRows(node, target)
    case "SetRows":
      return Indexing.setRows(node, target)
    case "Rope":
      return rope(node, op, target)
    case "MulMat":
      return mulMat(node, target, undefined)
    case "MulMatAdd":
      return mulMat(node, target, node.src[2])
    case "SoftMax":
      return Rows.softMax(node, op, target)
    case "RmsNorm":
      return Rows.rmsNorm(node, op.eps, false, false, target)
    case "RmsNormMul":
      return Rows.rmsNorm(node, op.eps, false, true, target)
    case "AddRmsNorm":
      return Rows.rmsNorm(node, op.eps, true, op.withMul, target)
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
    case "GroupNorm":
    case "FlashAttnExt":
    case "MulMatId":
    case "AddId":
      return undefined
    default:
      return unreachable(op)
  }
}

const unreachable = (op: never): never => {
  throw new Error(`webgpu: no kernel for ${(op as Op.Op)._tag}`)
}

/** ops this backend has no kernel for yet */
const missing = new Set<Op.Tag>(["L2Norm", "GroupNorm", "FlashAttnExt", "MulMatId", "AddId"])

/**
 * @internal: whether the target has a kernel for a node with these types and sizes: every op that is
 * not a view has one (`kernelFor` covers the whole union), for f32, f16 (where the device has shader-f16)
 * and i32 operands whose strides are whole elements and that fit a binding
 */
export const supports = (node: Tensor.Tensor, target: KernelTarget, maxBinding: number): boolean => {
  if (Op.isView(node.op) || node.op._tag === "None") return true
  if (missing.has(node.op._tag)) return false
  if (node.op._tag === "SoftMax" && node.op.hasSinks) return false
  if (node.op._tag === "Rope" && (node.op.mode > 2 || node.op.hasFreqFactors || node.op.extFactor !== 0)) return false
  for (const t of [node, ...node.src]) {
    if (!DType.isComputable(t.dtype)) return false
    if (t.dtype === "f16" && !target.f16) return false
    if (Tensor.nbytes(t) > maxBinding) return false
    if (t.nb.some((n) => n % DType.typeSize(t.dtype) !== 0)) return false
  }
  if (node.op._tag === "MulMat" || node.op._tag === "MulMatAdd") {
    if (node.src[0].dtype === "i32" || node.src[1].dtype === "i32") return false
  }
  return true
}
