/**
 * Element-wise kernels: one thread per element over any strides and broadcasts (the grid template), a
 * flat form over contiguous operands (scalars or vec4s, several elements per thread), and chains of
 * element-wise nodes fused into one kernel whose intermediate results stay in registers. Everything is
 * computed in f32; f16 and i32 operands are converted at load and store.
 *
 * @internal
 */
import type { Op } from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { Kernel, KernelTarget, Operand, Param, Variant } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { bcast, entry, f32, range, stridesAligned, u32, WG } from "./kernel.js"

/**
 * @internal: the grid template: one thread per element of the iteration operand `it`, whose indices
 * (i0, i1, i2, i3) the body reads
 */
export const elementwise = (
  variant: Variant,
  operands: ReadonlyArray<Operand>,
  it: string,
  body: string,
  params: ReadonlyArray<Param>,
  target: KernelTarget
): Kernel => {
  const t = operands.find((o) => o.name === it)!.tensor
  const n = Tensor.nelements(t)
  const ne = (i: number) => `P.${it}_ne${i}`
  return KernelSpec.make({
    variant,
    operands,
    params,
    workgroups: fold(Math.ceil(n / WG), target.maxWorkgroups),
    main: `
${entry()}
  let idx = wg_linear(wid, nwg) * ${WG}u + lid;
  if (idx >= ${ne(0)} * ${ne(1)} * ${ne(2)} * ${ne(3)}) { return; }
  let i0 = idx % ${ne(0)};
  let r1 = idx / ${ne(0)};
  let i1 = r1 % ${ne(1)};
  let r2 = r1 / ${ne(1)};
  let i2 = r2 % ${ne(2)};
  let i3 = r2 / ${ne(2)};
${body}
}`
  })
}

/** every operand's rows are runs of fours (ne0 and the strides past it multiples of four elements) */
const rowsOfFours = (node: Tensor.Tensor): boolean =>
  node.ne[0] % 4 === 0 && [node, ...node.src].every((t) => stridesAligned(t, 4))

/**
 * The grid template four values a thread, where every operand's rows are runs of fours (`rowsOfFours`; its
 * offsets checked when bound, else `fallback` runs): the body reads i0 (a multiple of four), i1, i2, i3
 * through the ld4_/st4_ accessors. Views such as a prompt's gate and up halves of one product or a permute
 * that keeps dimension 0: the one-value form's index arithmetic and scalar f16 loads ran a prompt's glu
 * far below bandwidth (benchmarks/RESULTS.md, choices)
 */
const elementwise4 = (
  variant: Variant,
  operands: ReadonlyArray<Operand>,
  body: string,
  params: ReadonlyArray<Param>,
  target: KernelTarget,
  fallback: Kernel
): Kernel => {
  const d = operands.find((o) => o.name === "d")!.tensor
  const kernel = KernelSpec.make({
    variant: { ...variant, width: 4 },
    operands,
    params,
    workgroups: fold(Math.ceil(Tensor.nelements(d) / 4 / WG), target.maxWorkgroups),
    main: `
${entry()}
  let q = P.d_ne0 / 4u;
  let idx = wg_linear(wid, nwg) * ${WG}u + lid;
  if (idx >= q * P.d_ne1 * P.d_ne2 * P.d_ne3) { return; }
  let i0 = 4u * (idx % q);
  let r1 = idx / q;
  let i1 = r1 % P.d_ne1;
  let r2 = r1 / P.d_ne1;
  let i2 = r2 % P.d_ne2;
  let i3 = r2 / P.d_ne2;
${body}
}`
  })
  return { ...kernel, vec4: true, fallback }
}

type UnaryOp = Extract<
  Op,
  { _tag: "Scale" | "Sqr" | "Sqrt" | "Exp" | "Log" | "Clamp" | "Cpy" | "Cont" | "Unary" }
>

/** the parameters of a unary op, under names with `suffix` (chains give each step its own) */
const unaryParams = (op: Op, suffix = ""): Array<Param> =>
  op._tag === "Scale"
    ? [f32(`s${suffix}`, op.s)]
    : op._tag === "Clamp"
    ? [f32(`lo${suffix}`, op.min), f32(`hi${suffix}`, op.max)]
    : []

/** WGSL for a unary op applied to `x`, reading its parameters with `suffix` (see unaryParams) */
const unaryExpr = (op: Op, x: string, suffix = ""): string => {
  switch (op._tag) {
    case "Scale":
      return `${x} * P.s${suffix}`
    case "Sqr":
      return `${x} * ${x}`
    case "Sqrt":
      return `sqrt(${x})`
    case "Exp":
      return `exp(${x})`
    case "Log":
      return `log(${x})`
    case "Clamp":
      return `clamp(${x}, P.lo${suffix}, P.hi${suffix})`
    case "Cpy":
    case "Cont":
      return x
    case "Unary":
      switch (op.kind) {
        case "relu":
          return `max(${x}, 0.0)`
        case "gelu":
          return `gelu_s(${x})`
        case "gelu_quick":
          return `gelu_quick_s(${x})`
        case "silu":
          return `silu_s(${x})`
        case "tanh":
          return `tanh_s(${x})`
        case "sigmoid":
          return `sigmoid_s(${x})`
        case "neg":
          return `-${x}`
        case "abs":
          return `abs(${x})`
      }
  }
  throw new Error(`not a unary op: ${op._tag}`)
}

/** ggml's name of a unary op, as variants and keys spell it */
const unaryName = (op: Op): string => op._tag === "Unary" ? op.kind : op._tag

const binaryOp: Record<string, string> = { Add: "+", Sub: "-", Mul: "*", Div: "/" }

/** contiguous operands of one shape (src1 may repeat one row): flat indices, FLAT steps per thread */
const FLAT = 4

/**
 * The flat kernel, on scalars (`width` 1) or vec4s (`width` 4: bindings are vec4 arrays, offsets and
 * sizes are divided by 4; it falls back to the scalar form when an operand is not 4-aligned).
 */
const flatKernel = (
  width: 1 | 4,
  op: string,
  operands: ReadonlyArray<Operand>,
  expr: string,
  rowBroadcast: boolean,
  params: ReadonlyArray<Param>,
  target: KernelTarget
): Kernel => {
  const n = Tensor.nelements(operands[operands.length - 1].tensor)
  const [ld, st, q] = width === 4 ? ["ld4", "st4", " / 4u"] : ["ld", "st", ""]
  const b = rowBroadcast ? `P.b_o${q} + i % (P.b_ne0${q})` : `P.b_o${q} + i`
  const binary = operands.some((o) => o.name === "b")
  const vt = width === 4 ? "vec4<f32>" : "f32"
  const kernel = KernelSpec.make({
    variant: { family: "flat", op, width, rowBroadcast },
    operands,
    params,
    workgroups: fold(Math.ceil(n / width / (WG * FLAT)), target.maxWorkgroups),
    main: `
${entry()}
  let n = P.d_ne0 * P.d_ne1 * P.d_ne2 * P.d_ne3${q};
  let base = wg_linear(wid, nwg) * ${WG * FLAT}u + lid;
  // every load before any store: the bindings may alias as far as the compiler knows, so loads placed
  // after a store would wait for it; this way FLAT loads per operand are in flight at once
  var xs: array<${vt}, ${FLAT}>;
  ${binary ? `var ys: array<${vt}, ${FLAT}>;` : ""}
  for (var k = 0u; k < ${FLAT}u; k++) {
    let i = base + k * ${WG}u;
    if (i < n) {
      xs[k] = ${ld}_a(P.a_o${q} + i);
      ${binary ? `ys[k] = ${ld}_b(${b});` : ""}
    }
  }
  for (var k = 0u; k < ${FLAT}u; k++) {
    let i = base + k * ${WG}u;
    if (i < n) {
      let x = xs[k];
      ${binary ? "let y = ys[k];" : ""}
      ${st}_d(P.d_o${q} + i, ${expr});
    }
  }
}`
  })
  return width === 4
    ? { ...kernel, vec4: true, fallback: flatKernel(1, op, operands, expr, rowBroadcast, params, target) }
    : kernel
}

/** flat4 where the sizes allow it (and the op has a vec4 form `expr4`), else flat */
const flatBest = (
  op: string,
  operands: ReadonlyArray<Operand>,
  expr: string,
  expr4: string | undefined,
  rowBroadcast: boolean,
  params: ReadonlyArray<Param>,
  target: KernelTarget
): Kernel => {
  const n = Tensor.nelements(operands[operands.length - 1].tensor)
  const b = operands.find((o) => o.name === "b")
  const fits = expr4 !== undefined && n % 4 === 0 && (b === undefined || !rowBroadcast || b.tensor.ne[0] % 4 === 0)
  return fits
    ? flatKernel(4, op, operands, expr4, rowBroadcast, params, target)
    : flatKernel(1, op, operands, expr, rowBroadcast, params, target)
}

/** the flat path applies: everything contiguous, src1 the same shape or one repeated row */
const flatBinary = (node: Tensor.Tensor): "same" | "row" | undefined => {
  const [a, b] = node.src
  if (!Tensor.isContiguous(node) || !Tensor.isContiguous(a) || !Tensor.isContiguous(b)) return undefined
  if (Tensor.sameShape(a, b)) return "same"
  return b.ne[0] === a.ne[0] && Tensor.nelements(b) === b.ne[0] ? "row" : undefined
}

/** @internal: add, sub, mul, div with src1 broadcast over src0 */
export const binary = (node: Tensor.Tensor, target: KernelTarget): Kernel => {
  const op = node.op._tag
  const operands = [{ name: "a", tensor: node.src[0] }, { name: "b", tensor: node.src[1] }, { name: "d", tensor: node }]
  const sign = binaryOp[op]
  const flat = flatBinary(node)
  if (flat !== undefined) return flatBest(op, operands, `x ${sign} y`, `x ${sign} y`, flat === "row", [], target)
  const body = `  st_d(ix_d(i0, i1, i2, i3), ld_a(ix_a(i0, i1, i2, i3)) ${sign} ld_b(${bcast("b")}));`
  return elementwise({ family: "ew", op }, operands, "d", body, [], target)
}

/** unary ops whose WGSL works on vec4s too (exp, sqrt, log, max and arithmetic do) */
const vectorizable = (op: UnaryOp): boolean =>
  op._tag === "Scale" || op._tag === "Cpy" || op._tag === "Cont" || op._tag === "Sqr" || op._tag === "Exp" ||
  op._tag === "Sqrt" || op._tag === "Log" || (op._tag === "Unary" && op.kind === "relu")

/** @internal: unary ops, copies and conversions (cpy, cont) */
export const unary = (node: Tensor.Tensor, op: UnaryOp, target: KernelTarget): Kernel => {
  const src = node.src[0]
  const operands = [{ name: "a", tensor: src }, { name: "d", tensor: node }]
  if (node.dtype === "i32" || src.dtype === "i32") {
    const body = `  st_d(ix_d(i0, i1, i2, i3), ldi_a(ix_a(i0, i1, i2, i3)));`
    return elementwise({ family: "ew", op: "copy_i32" }, operands, "d", body, [], target)
  }
  const params = unaryParams(op)
  const name = unaryName(op)
  const x4 = op._tag === "Unary" && op.kind === "relu" ? "max(x, vec4<f32>(0.0))" : unaryExpr(op, "x")
  if (Tensor.isContiguous(node) && Tensor.isContiguous(src)) {
    return flatBest(name, operands, unaryExpr(op, "x"), vectorizable(op) ? x4 : undefined, false, params, target)
  }
  const body = `  let x = ld_a(ix_a(i0, i1, i2, i3));\n  st_d(ix_d(i0, i1, i2, i3), ${unaryExpr(op, "x")});`
  const scalar = elementwise({ family: "ew", op: name }, operands, "d", body, params, target)
  if (!vectorizable(op) || !rowsOfFours(node)) return scalar
  // a permute that keeps dimension 0 (a prompt's attention output) four values a thread
  const body4 = `  let x = ld4_a(ix_a(i0, i1, i2, i3) >> 2u);\n  st4_d(ix_d(i0, i1, i2, i3) >> 2u, ${x4});`
  return elementwise4({ family: "ew", op: name }, operands, body4, params, target, scalar)
}

/** @internal */
export const concat = (node: Tensor.Tensor, dim: number, target: KernelTarget): Kernel =>
  elementwise(
    { family: "ew", op: "concat" },
    [{ name: "a", tensor: node.src[0] }, { name: "b", tensor: node.src[1] }, { name: "d", tensor: node }],
    "d",
    `  var i = vec4<u32>(i0, i1, i2, i3);
  let an = vec4<u32>(P.a_ne0, P.a_ne1, P.a_ne2, P.a_ne3);
  var v = 0.0;
  if (i[P.dim] < an[P.dim]) { v = ld_a(ix_a(i0, i1, i2, i3)); }
  else { i[P.dim] -= an[P.dim]; v = ld_b(ix_b(i.x, i.y, i.z, i.w)); }
  st_d(ix_d(i0, i1, i2, i3), v);`,
    [u32("dim", dim)],
    target
  )

/** @internal: zeros past the source's end in every dimension */
export const pad = (node: Tensor.Tensor, target: KernelTarget): Kernel =>
  elementwise(
    { family: "ew", op: "pad" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    "d",
    `  var v = 0.0;
  if (i0 < P.a_ne0 && i1 < P.a_ne1 && i2 < P.a_ne2 && i3 < P.a_ne3) { v = ld_a(ix_a(i0, i1, i2, i3)); }
  st_d(ix_d(i0, i1, i2, i3), v);`,
    [],
    target
  )

/** @internal */
export const repeat = (node: Tensor.Tensor, target: KernelTarget): Kernel =>
  elementwise(
    { family: "ew", op: "repeat" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    "d",
    `  st_d(ix_d(i0, i1, i2, i3), ld_a(${bcast("a")}));`,
    [],
    target
  )

/** @internal */
export const diagMaskInf = (node: Tensor.Tensor, nPast: number, target: KernelTarget): Kernel =>
  elementwise(
    { family: "ew", op: "diag_mask_inf" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    "d",
    `  var v = ld_a(ix_a(i0, i1, i2, i3));
  if (i0 > P.n_past + i1) { v = neg_inf(); }
  st_d(ix_d(i0, i1, i2, i3), v);`,
    [u32("n_past", nPast)],
    target
  )

/** @internal: act(x) * y over the halves of one operand, or of an operand and a gate */
export const glu = (node: Tensor.Tensor, op: Extract<Op, { _tag: "Glu" }>, target: KernelTarget): Kernel => {
  const act = op.kind === "swiglu" ? "silu_s" : "gelu_s"
  const a = { name: "a", tensor: node.src[0] }
  const d = { name: "d", tensor: node }
  const at = (t: string, i0: string) => `ld_${t}(ix_${t}(${i0}, i1, i2, i3))`
  const fours = rowsOfFours(node)
  const at4 = (t: string, i0: string) => `ld4_${t}(ix_${t}(${i0}, i1, i2, i3) >> 2u)`
  const gated4 = (x: string, y: string) =>
    `  let g = ${x};\n  st4_d(ix_d(i0, i1, i2, i3) >> 2u, vec4<f32>(${
      range(4).map((c) => `${act}(g[${c}])`).join(", ")
    }) * ${y});`
  if (node.src.length > 1) {
    const [x, y] = op.swapped ? ["g", "a"] : ["a", "g"]
    const variant = { family: "ew", op: "glu", kind: op.kind, swapped: op.swapped, gate: true }
    const operands = [a, { name: "g", tensor: node.src[1] }, d]
    const scalar = elementwise(
      variant,
      operands,
      "d",
      `  st_d(ix_d(i0, i1, i2, i3), ${act}(${at(x, "i0")}) * ${at(y, "i0")});`,
      [],
      target
    )
    return fours ? elementwise4(variant, operands, gated4(at4(x, "i0"), at4(y, "i0")), [], target, scalar) : scalar
  }
  const [ox, oy] = op.swapped ? ["P.d_ne0", "0u"] : ["0u", "P.d_ne0"]
  const variant = { family: "ew", op: "glu", kind: op.kind, swapped: op.swapped, gate: false }
  const scalar = elementwise(
    variant,
    [a, d],
    "d",
    `  st_d(ix_d(i0, i1, i2, i3), ${act}(${at("a", `i0 + ${ox}`)}) * ${at("a", `i0 + ${oy}`)});`,
    [],
    target
  )
  return fours
    ? elementwise4(variant, [a, d], gated4(at4("a", `i0 + ${ox}`), at4("a", `i0 + ${oy}`)), [], target, scalar)
    : scalar
}

/** element-wise ops that a chain kernel can evaluate one after another on a register */
const chainOps = new Set(["Add", "Sub", "Mul", "Div", "Scale", "Sqr", "Sqrt", "Exp", "Log", "Unary", "Clamp"])

/** @internal: a node the chain fusion may take: contiguous, f32/f16, src0 the running value */
export const chainable = (node: Tensor.Tensor): boolean => {
  if (!chainOps.has(node.op._tag) || (node.dtype !== "f32" && node.dtype !== "f16")) return false
  if (!Tensor.isContiguous(node) || !Tensor.isContiguous(node.src[0]) || !Tensor.sameShape(node, node.src[0])) {
    return false
  }
  return node.src.length === 1 || flatBinary(node) !== undefined
}

/** @internal: the most distinct inputs one chain kernel binds */
export const CHAIN_INPUTS = 5

/**
 * @internal: one kernel for a chain of element-wise nodes, each reading the previous one's result as
 * src0; the intermediate results stay in registers and are never written.
 */
export const chain = (nodes: ReadonlyArray<Tensor.Tensor>, target: KernelTarget): Kernel => {
  const inputs: Array<Tensor.Tensor> = [nodes[0].src[0]]
  const input = (t: Tensor.Tensor) => {
    let k = inputs.indexOf(t)
    if (k < 0) k = inputs.push(t) - 1
    return k
  }
  const params: Array<Param> = []
  const signature: Array<string> = []
  const steps = nodes.map((node, j) => {
    const op = node.op
    if (node.src.length > 1) {
      const k = input(node.src[1])
      const row = flatBinary(node) === "row"
      signature.push(`${op._tag}${k}${row ? "r" : ""}`)
      return `      v = v ${binaryOp[op._tag]} ld_x${k}(P.x${k}_o + ${row ? `i % P.x${k}_ne0` : "i"});`
    }
    params.push(...unaryParams(op, String(j)))
    signature.push(unaryName(op))
    return `      v = ${unaryExpr(op, "v", String(j))};`
  })
  const last = nodes[nodes.length - 1]
  const n = Tensor.nelements(last)
  return KernelSpec.make({
    variant: { family: "chain", steps: signature.join(",") },
    operands: [...inputs.map((t, k) => ({ name: `x${k}`, tensor: t })), { name: "d", tensor: last }],
    params,
    workgroups: fold(Math.ceil(n / (WG * FLAT)), target.maxWorkgroups),
    main: `
${entry()}
  let n = P.d_ne0 * P.d_ne1 * P.d_ne2 * P.d_ne3;
  let base = wg_linear(wid, nwg) * ${WG * FLAT}u + lid;
  for (var k = 0u; k < ${FLAT}u; k++) {
    let i = base + k * ${WG}u;
    if (i < n) {
      var v = ld_x0(P.x0_o + i);
${steps.join("\n")}
      st_d(P.d_o + i, v);
    }
  }
}`
  })
}
