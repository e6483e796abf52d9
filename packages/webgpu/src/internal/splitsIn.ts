/**
 * A split-K product's partial sums added by the norm that reads it (KernelTarget.splitsInNorms): where a
 * product splits K (its partial sums after its result, a merge dispatch adding them up) and the dispatch
 * right after its merge is its one reader, an add_rms_norm taking it as the sum's second term (a prompt's
 * residual sum and norm after a layer's output projection or down projection), the norm adds the partials
 * itself in place of the result and the merge's dispatch goes. The norm then reads the splits' partials
 * where the merge read them, wrote the result and the norm read that.
 *
 * @internal
 */
import * as Tensor from "@effect-gpu/core/Tensor"
import type { Kernel, KernelTarget } from "./kernels/kernel.js"
import * as Rows from "./kernels/rows.js"

/** @internal: a prepared dispatch as this pass sees it: its node and kernel */
export interface Prepared {
  readonly node: Tensor.Tensor
  readonly kernel: Kernel
}

/** the norm's result kept beside the sum, stored over the stream, or neither (select.ts's row kernels) */
const kept = { AddRmsNorm: undefined, AddRmsNormKeep: "beside", AddRmsNormStore: "over" } as const

/**
 * @internal: `list` with each merge that only adds partial sums folded into the add_rms_norm dispatched right
 * after it: the product's one reader (`readers`), not an output, contiguous f32 of the norm's row shape;
 * the norm's row kernel rebuilt to read the partials (`prepare` throws where it cannot bind them)
 */
export const foldIntoNorms = <P extends Prepared>(
  list: ReadonlyArray<P>,
  target: KernelTarget,
  readers: (t: Tensor.Tensor) => number,
  isOutput: (t: Tensor.Tensor) => boolean,
  prepare: (node: Tensor.Tensor, kernel: Kernel) => P
): Array<P> => {
  if (target.splitsInNorms === false) return [...list]
  const out: Array<P> = []
  for (let k = 0; k < list.length; k++) {
    const merge = list[k]
    const norm = list[k + 1]?.node
    const sums = merge.kernel.sums
    const product = merge.node
    const op = norm?.op
    if (
      sums !== undefined && norm !== undefined && op !== undefined &&
      (op._tag === "AddRmsNorm" || op._tag === "AddRmsNormKeep" || op._tag === "AddRmsNormStore") &&
      norm.src[1] === product && norm.src[0] !== product && readers(product) === 1 && !isOutput(product) &&
      product.dtype === "f32" && Tensor.isContiguous(product) && Tensor.sameShape(product, norm.src[0])
    ) {
      try {
        const p = prepare(norm, Rows.rmsNorm(norm, op.eps, true, op.withMul, target, kept[op._tag], sums))
        out.push(p)
        k++
        continue
      } catch {
        // the merge and the norm as they were
      }
    }
    out.push(merge)
  }
  return out
}
