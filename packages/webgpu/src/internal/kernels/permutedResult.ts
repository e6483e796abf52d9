/**
 * A product whose one reader is a contiguous copy of it permuted (cont(permute(mul_mat)): attention's
 * chain turns V·P's [D, tokens, heads] into the [D, heads, tokens] the output projection reads) stores its
 * result in that permuted layout itself, straight into the copy's memory, and the copy's dispatch goes. The
 * product kernels store through their result's strides (ix_d, or rows at a stride), so the result operand
 * is a view of the copy's memory with the product's shape and the strides each of its axes has there.
 *
 * @internal
 */
import * as Op from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import type { Kernel } from "./kernel.js"

/**
 * @internal: the product's result as a view of `copy`'s memory where `copy` is a contiguous copy of a
 * permutation of `product` (the permute's one source) that keeps its rows (axis 0 stays first: the kernels
 * store rows of contiguous values), of one type; undefined otherwise
 */
export const resultIn = (product: Tensor.Tensor, copy: Tensor.Tensor): Tensor.Tensor | undefined => {
  const permuted = copy.src[0]
  if (copy.op._tag !== "Cont" || permuted?.op._tag !== "Permute" || permuted.src[0] !== product) return undefined
  const axes = permuted.op.axes
  if (axes[0] !== 0 || copy.dtype !== product.dtype || !Tensor.isContiguous(product)) return undefined
  // the product's element (i0..i3) sits at index j of the permutation (j[axes[i]] = i_i), so at
  // sum_i i_i * copy.nb[axes[i]] in the copy
  const nb = [0, 1, 2, 3].map((i) => copy.nb[axes[i]]) as unknown as Tensor.Shape
  return Tensor.unsafeView(copy, product.ne, nb, 0, Op.Op.View(), [copy])
}

/**
 * @internal: `kernel` (and its fallbacks) storing the product's result into `into` in place of the
 * product's own memory; undefined where a form keeps scratch after its result or dispatches again for it
 * (split-K's partials and merge), which the copy's memory has no room for
 */
export const storingInto = (kernel: Kernel, product: Tensor.Tensor, into: Tensor.Tensor): Kernel | undefined => {
  if (kernel.next !== undefined) return undefined
  const d = kernel.operands.find((o) => o.name === "d")
  if (d === undefined || d.tensor !== product || d.within !== undefined || d.extent !== undefined) return undefined
  // a form binding its result as vec4s (8 f16 where wide) stores whole groups at the strides it is given,
  // which the copy's must then keep: else the forms after it
  const group = kernel.wide === true && into.dtype === "f16" ? 8 : 4
  const es = into.nb[0]
  const vectored = d.binding === "vec4" ||
    (d.binding === undefined && kernel.vec4 === true && !(kernel.scalar ?? []).includes("d"))
  if (vectored && [1, 2, 3].some((i) => (into.nb[i] / es) % group !== 0)) {
    return kernel.fallback === undefined ? undefined : storingInto(kernel.fallback, product, into)
  }
  const fallback = kernel.fallback === undefined ? undefined : storingInto(kernel.fallback, product, into)
  if (kernel.fallback !== undefined && fallback === undefined) return undefined
  // bound where the copy lies (the view is not one of the plan's tensors)
  const result = { ...d, tensor: into, within: { tensor: into.src[0], at: 0 } }
  return {
    ...kernel,
    operands: kernel.operands.map((o) => (o === d ? result : o)),
    ...(fallback !== undefined ? { fallback } : {})
  }
}
