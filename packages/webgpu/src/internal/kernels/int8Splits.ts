/**
 * Split-K for the int8 matrix-vector form: a product of few rows (a layer's output projection or down
 * projection at decode: 256 workgroups on an 8B model, 128 on a 1B one, fewer than two a compute unit of a
 * large GPU) spreads each row's K over several workgroups, each rounding and reading only its part of b and
 * of the weights; their partial sums go to scratch after the result, and a second dispatch adds them up and
 * does what the unsplit form does after its sums (the bias, a gated product's swiglu, a stack's stores).
 * Off unless asked (QuantizedDecode.int8Split): decoding ran slower with it (benchmarks/RESULTS.md).
 *
 * @internal
 */
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { Kernel, KernelTarget, Operand } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, u32, WG } from "./kernel.js"
import type { Product } from "./product.js"
import type { RowStores } from "./stackStores.js"

/** the unsplit grids the int8 form splits by default where asked: fewer workgroups than this */
const SPLIT_BELOW = 1024

/**
 * @internal: the workgroups the int8 form splits a product's K over: where QuantizedDecode.int8Split asks
 * and the unsplit grid (`groups` workgroups) is below int8SplitBelow (default SPLIT_BELOW), the fewest
 * splits of at most int8Split values each that cut K into whole runs of `unit` values (a lane's 64, or a
 * k-quant's block of 256); 1 elsewhere
 */
export const splitsOf = (K: number, unit: number, groups: number, target: KernelTarget): number => {
  const most = target.quantizedDecode?.int8Split
  if (most === undefined || K <= most || groups >= (target.quantizedDecode?.int8SplitBelow ?? SPLIT_BELOW)) return 1
  for (let s = 2; s * unit <= K; s++) if (K % (s * unit) === 0 && K / s <= most) return s
  return 1
}

/** @internal: the partial sums a split product keeps: `sets` (a gated product's two) of `splits` x `count` */
export const scratchOf = (splits: number, count: number, sets: number): number =>
  splits > 1 ? 4 * sets * splits * count : 0

/**
 * @internal: a split product's result operand reaching over its partial sums (after the result: each set
 * split by split, `count` values a split), the parameter that places them, and the dispatch that adds them
 * up: per row the splits' sums (a gated product's silu(gate) * up), the bias, the result, and `stores` (a
 * stack's keys and values, which read a row's neighbour in `red`)
 */
export const splitK = (
  product: Product,
  splits: number,
  gated: boolean,
  stores: RowStores | undefined
): { readonly d: Operand; readonly scratch: ReturnType<typeof u32>; readonly merge: Kernel } => {
  const node = product.operands.find((o) => o.name === "d")!.tensor
  const count = product.M * product.batches
  const d: Operand = {
    name: "d",
    tensor: node,
    extent: Tensor.nbytes(node) + scratchOf(splits, count, gated ? 2 : 1)
  }
  const scratch = u32("scratch", Tensor.nbytes(node) / 4)
  const bias = product.operands.filter((o) => o.name === "c")
  const sum = (set: number) => range(splits).map((s) => `ld_d(base + ${(set * splits + s) * count}u)`).join(" + ")
  const merge = KernelSpec.make({
    variant: { family: "mvq8_merge", splits, bias: product.bias, gated, ...stores?.variant },
    operands: [d, ...bias, ...(stores?.operands ?? [])],
    params: [scratch, ...(stores?.params ?? [])],
    workgroups: fold(Math.ceil(count / WG)),
    ...(!gated && stores === undefined && bias.length === 0 && product.epilogue === ""
      ? { sums: { splits, count } }
      : {}),
    main: `
var<workgroup> red: array<f32, ${WG}>;
${stores?.decls ?? ""}
${entry(WG)}
  // a thread a row; past the last it repeats the last row's sums for the barrier, and stores nothing
  let t = wg_linear(wid, nwg) * ${WG}u + lid;
  let tt = min(t, ${count - 1}u);
  let row = tt % P.d_ne0;
  let bz = tt / P.d_ne0;
  let b2 = bz % P.d_ne2;
  let b3 = bz / P.d_ne2;
  let base = P.d_o + P.scratch + tt;
  var v = ${gated ? `silu_s(${sum(0)}) * (${sum(1)})` : sum(0)};
  red[lid] = v;
  workgroupBarrier();
  if (t < ${count}u) {
    let m = row;
    let nn = 0u;
    ${product.epilogue}
    st_d(ix_d(m, nn, b2, b3), v);
    ${stores?.code ?? ""}
  }
}`
  })
  return { d, scratch, merge }
}
