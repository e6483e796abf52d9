/**
 * The fused products' kernels: a gated FFN's two products with their swiglu (mul_mat_swiglu) and products
 * sharing their activations stacked (mul_mat_stack), in their decoding forms (the int8 form, f16 weights by
 * subgroups, the vec4 matrix-vector form, a workgroup per result) and a prompt's gated product; and what
 * the WebGPU device asks Fusion for.
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import * as Op from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import * as Int8 from "./int8MatVec.js"
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, u32, WG } from "./kernel.js"
import { gatedPrompt, int8Gated, int8Stack } from "./matmul.js"
import { halfApplies, halfMatVec, matVec } from "./matvec.js"
import { leavesNorm } from "./normIn.js"
import * as Product from "./product.js"
import type { RowStores } from "./stackStores.js"

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
 * @internal: mul_mat_swiglu, silu(gate b) * (up b): a prompt's as one gated product (gatedPrompt); a
 * decoding step's by the int8 form with both weights where it applies, f16 weights by subgroups or the vec4
 * matrix-vector form (where the WebGPU device asks for the fusion), else a workgroup per result summing
 * both rows
 */
export const mulMatSwiglu = (node: Tensor.Tensor, target: KernelTarget, made?: Product.MadeB): Kernel => {
  const prompt = made === undefined ? gatedPrompt(node, target) : undefined
  if (prompt !== undefined) return prompt
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
 * @internal: whether the WebGPU device fuses a gated FFN's products: a decoding step's where the int8 form
 * computes them, f16 weights by subgroups or the vec4 matrix-vector form (f16 and f32 weights); a prompt's
 * where a gated form does (gatedPrompt: its weights a stack's two halves)
 */
export const fusesSwiglu = (target: KernelTarget) => (gate: Tensor.Tensor, up: Tensor.Tensor, b: Tensor.Tensor) => {
  if (b.ne[1] > 8) {
    const node = Tensor.unsafeMake("", "f32", [gate.ne[1], b.ne[1], b.ne[2], b.ne[3]], Op.Op.MulMatSwiglu(), [
      gate,
      up,
      b
    ])
    return gatedPrompt(node, target) !== undefined
  }
  return int8Gated({ N: b.ne[1], K: gate.ne[0] }, gate, up, target) ||
    vectorForm({ N: b.ne[1], K: gate.ne[0] }, [gate, up], b) ||
    (Tensor.sameShape(gate, up) && halfApplies({ N: b.ne[1], K: gate.ne[0] }, [gate, up], b, target))
}

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
 * @internal: whether the WebGPU device leaves a one-row norm to the products that read it (normIn.ts): each
 * of them one the int8 form or f16 weights by subgroups compute
 */
export const leavesNorms = (target: KernelTarget) =>
  leavesNorm(target, (weights, b) => {
    const product = { N: b.ne[1], K: weights.ne[0] }
    return Int8.int8Applies(product, weights, target) || halfApplies(product, [weights], b, target)
  })
