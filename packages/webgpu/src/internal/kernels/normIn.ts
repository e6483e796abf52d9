/**
 * A decoding step's norm made by the product that reads it: where a one-row rms_norm * weight (the hidden
 * state's norm before a layer's attention or FFN; the residual sum before it is made by the product before
 * that, mul_mat_add) comes right before the one product that reads it (a q/k/v stack or a gated FFN in the
 * int8 form, or of f16 weights by subgroups), each of that product's workgroups takes the norm of the row
 * itself as it reads its activations, and the norm's own dispatch goes: a dispatch fewer before each of a
 * layer's two products of the hidden state. Each workgroup then reads two rows of the hidden size where it
 * read one, so by default only up to the hidden sizes where that was measured to pay.
 *
 * @internal
 */
import * as Tensor from "@effect-gpu/core/Tensor"
import type { KernelTarget } from "./kernel.js"
import { f32 } from "./kernel.js"
import type { MadeB } from "./product.js"

/**
 * the longest row whose norm the products take by default: an 8B model's hidden size (faster decoding,
 * benchmarks/RESULTS.md, choices: matrix-vector); longer rows not yet measured
 */
const DEFAULT_MOST = 4096

/** a contiguous f32 row of `n` values (one row in all) */
const row = (t: Tensor.Tensor, n: number) =>
  t.dtype === "f32" && t.ne[0] === n && Tensor.nrows(t) === 1 && Tensor.isContiguous(t)

/**
 * @internal: where a backend leaves a one-row norm to the products that read it (`readers`, before they are
 * fused), so that the sum before it is better made by the product before it than kept beside the norm: its
 * rows short enough (`normsInProducts`), every reader a one-column product whose weights `takes` accepts
 */
export const leavesNorm = (
  target: KernelTarget,
  takes: (weights: Tensor.Tensor, b: Tensor.Tensor) => boolean
) =>
(norm: Tensor.Tensor, readers: ReadonlyArray<Tensor.Tensor>): boolean =>
  norm.ne[0] <= mostOf(target) && readers.length > 0 &&
  readers.every((r) => r.op._tag === "MulMat" && r.src[1] === norm && takes(r.src[0], norm))

const mostOf = (target: KernelTarget) =>
  target.normsInProducts === true ? Infinity : target.normsInProducts === false ? 0 : DEFAULT_MOST

/**
 * @internal: the norm `norm` (rms_norm_mul) as the product reading it can make it, or undefined where it
 * cannot or is not asked to: one contiguous f32 row of a length the kernels read four at a time, and its
 * weight; `bindings` the product's own leaving room for the norm's (b's goes) under the adapter's
 * `maxBindings`
 */
export const normBefore = (
  norm: Tensor.Tensor,
  target: KernelTarget,
  bindings: number,
  maxBindings: number
): MadeB | undefined => {
  if (norm.op._tag !== "RmsNormMul") return undefined
  const [x, w] = norm.src
  const D = x.ne[0]
  if (D > mostOf(target) || D % 4 !== 0 || !row(x, D) || !row(w, D) || bindings + 1 > maxBindings) return undefined
  const at = (n: string, k: string) => `ld4_${n}(ix_${n}(${k}, 0u, 0u, 0u) >> 2u)`
  // the row's squares (each invocation's in nss) reduced over the workgroup into nscale: by subgroup sums and
  // one barrier where the kernel has subgroups of `lanes` (every workgroup waits on this before its first
  // weight load), else by a tree
  const reduce = (n: number, lanes?: number) =>
    lanes !== undefined && target.normReduce !== "tree" && n % lanes === 0
      ? `  let nsg = subgroupAdd(nss);
  if (lid % ${lanes}u == 0u) { nred[lid / ${lanes}u] = nsg; }
  workgroupBarrier();
  var ntotal = 0.0;
  for (var s = 0u; s < ${n / lanes}u; s++) { ntotal += nred[s]; }
  let nscale = inverseSqrt(ntotal / ${D}.0 + P.eps);`
      : `  nred[lid] = nss;
  workgroupBarrier();
  for (var s = ${n / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { nred[lid] += nred[lid + s]; }
    workgroupBarrier();
  }
  let nscale = inverseSqrt(nred[0] / ${D}.0 + P.eps);`
  return {
    operands: [{ name: "nx", tensor: x }, { name: "nw", tensor: w }],
    params: [f32("eps", norm.op.eps)],
    decls: (n) => `var<workgroup> nred: array<f32, ${n}>;`,
    workgroupBytes: (n) => 4 * n,
    prologue: (n, lanes) =>
      `  var nss = 0.0;
  for (var k = 4u * lid; k < ${D}u; k += ${4 * n}u) {
    let x4 = ${at("nx", "k")};
    nss += dot(x4, x4);
  }
${reduce(n, lanes)}`,
    fourAt: (k) => `${at("nx", k)} * nscale * ${at("nw", k)}`,
    variant: target.normReduce === "tree" ? { norm: true, normReduce: "tree" } : { norm: true },
    scaled: {
      begin: "  var nss = 0.0;",
      load: (k, into) => `{ let x4 = ${at("nx", k)}; nss += dot(x4, x4); ${into} = x4 * ${at("nw", k)}; }`,
      scale: reduce
    }
  }
}
