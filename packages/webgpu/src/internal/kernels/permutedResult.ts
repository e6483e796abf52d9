/**
 * mul_mat_permuted (Fusion: a product whose one reader is a contiguous copy of it permuted; attention's
 * chain turns V·P's [D, tokens, heads] into the [D, heads, tokens] the output projection reads): the
 * product's kernel, storing its result in the permuted layout itself, and the copy's dispatch goes. The
 * product kernels store through their result's strides (ix_d, or rows at a stride), so the result operand
 * is a view of the node's memory with the product's shape and the strides each of its axes has there.
 *
 * @internal
 */
import * as Op from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import type { Kernel, KernelTarget } from "./kernel.js"
import { mulMat } from "./matmul.js"

type Axes = readonly [number, number, number, number]

/** the product a mul_mat_permuted node computes, as a mul_mat node of its own (its shape unpermuted) */
const productOf = (a: Tensor.Tensor, b: Tensor.Tensor, dtype: Tensor.Tensor["dtype"], name: string) =>
  Tensor.unsafeMake(name, dtype, [a.ne[1], b.ne[1], b.ne[2], b.ne[3]], Op.Op.MulMat(), [a, b])

/**
 * the product's result as a view of `node`'s memory (contiguous, the permuted shape): the product's
 * element (i0..i3) sits at index j of the permutation (j[axes[i]] = i_i), so at sum_i i_i node.nb[axes[i]]
 */
const resultIn = (product: Tensor.Tensor, node: Tensor.Tensor, axes: Axes): Tensor.Tensor =>
  Tensor.unsafeView(
    node,
    product.ne,
    [0, 1, 2, 3].map((i) => node.nb[axes[i]]) as unknown as Tensor.Shape,
    0,
    Op.Op.View(),
    [node]
  )

/**
 * @internal: `kernel` (and its fallbacks) storing the product's result into `into` in place of the
 * product's own memory; undefined where a form keeps scratch after its result or dispatches again for it
 * (split-K's partials and merge), which the node's memory has no room for
 */
export const storingInto = (kernel: Kernel, product: Tensor.Tensor, into: Tensor.Tensor): Kernel | undefined => {
  if (kernel.next !== undefined) return undefined
  const d = kernel.operands.find((o) => o.name === "d")
  if (d === undefined || d.tensor !== product || d.within !== undefined || d.extent !== undefined) return undefined
  // a form binding its result as vec4s (8 f16 where wide) stores whole groups at the strides it is given,
  // which the node's must then keep: else the forms after it
  const group = kernel.wide === true && into.dtype === "f16" ? 8 : 4
  const es = into.nb[0]
  const vectored = kernel.vec4 === true && !(kernel.scalar ?? []).includes("d")
  if (vectored && [1, 2, 3].some((i) => (into.nb[i] / es) % group !== 0)) {
    return kernel.fallback === undefined ? undefined : storingInto(kernel.fallback, product, into)
  }
  const fallback = kernel.fallback === undefined ? undefined : storingInto(kernel.fallback, product, into)
  if (kernel.fallback !== undefined && fallback === undefined) return undefined
  // bound where the node lies (the view is not one of the plan's tensors)
  const result = { ...d, tensor: into, within: { tensor: into.src[0], at: 0 } }
  return {
    ...kernel,
    operands: kernel.operands.map((o) => (o === d ? result : o)),
    ...(fallback !== undefined ? { fallback } : {})
  }
}

/** @internal: the kernel of a mul_mat_permuted node, or undefined where its product's forms cannot store so */
export const mulMatPermuted = (node: Tensor.Tensor, target: KernelTarget): Kernel | undefined => {
  if (node.op._tag !== "MulMatPermuted" || node.op.axes[0] !== 0) return undefined
  const product = productOf(node.src[0], node.src[1], node.dtype, node.name)
  return storingInto(mulMat(product, target, undefined), product, resultIn(product, node, node.op.axes))
}

/**
 * @internal: whether this backend stores `product` permuted by `axes` (Fusion.Options.mulMatPermuted):
 * axis 0 first, and a form of its kernel that keeps no scratch (a stand-in node of the permuted shape)
 */
export const storesPermuted = (target: KernelTarget) => (product: Tensor.Tensor, axes: Axes): boolean => {
  if (axes[0] !== 0) return false
  const ne = [0, 0, 0, 0]
  for (let i = 0; i < 4; i++) ne[axes[i]] = product.ne[i]
  const node = Tensor.unsafeMake(
    product.name,
    product.dtype,
    ne as unknown as Tensor.Shape,
    Op.Op.MulMatPermuted({ axes }),
    product.src
  )
  return mulMatPermuted(node, target) !== undefined
}
