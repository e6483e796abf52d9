/**
 * One WGSL generator per op family. A kernel names its operands (bound by the program builder, which
 * merges overlapping ones into one binding), the extra parameters it needs, its workgroup grid, and the
 * body of `main`. Everything is computed in f32; f16 and i32 operands are converted at load and store.
 *
 * @internal
 */
import type { Op } from "@effect-gpu/core/Op"
import type { Tensor } from "@effect-gpu/core/Tensor"
import * as T from "@effect-gpu/core/Tensor"
import type { Caps, Kernel, Operand, Param } from "./kernel.js"
import { bcast, ENTRY, f32, stridesAligned, SUBGROUP_ENTRY, SUBGROUP_LANES, u32, WG } from "./kernel.js"
import { mulMat } from "./matmul.js"
import { fold } from "./wgsl.js"

export type { Caps, Kernel } from "./kernel.js"

/** the element-wise template: one thread per element of the iteration operand `it` */
const elementwise = (
  key: string,
  operands: ReadonlyArray<Operand>,
  it: string,
  body: string,
  params: ReadonlyArray<Param>,
  caps: Caps
): Kernel => {
  const t = operands.find((o) => o.name === it)!.tensor
  const n = T.nelements(t)
  return {
    key: `ew:${key}`,
    operands,
    params,
    workgroups: fold(Math.ceil(n / WG), caps.maxWorkgroups),
    main: `
${ENTRY}
  let idx = wg_linear(wid, nwg) * ${WG}u + lid;
  if (idx >= P.${it}_ne0 * P.${it}_ne1 * P.${it}_ne2 * P.${it}_ne3) { return; }
  let i0 = idx % P.${it}_ne0;
  let r1 = idx / P.${it}_ne0;
  let i1 = r1 % P.${it}_ne1;
  let r2 = r1 / P.${it}_ne1;
  let i2 = r2 % P.${it}_ne2;
  let i3 = r2 / P.${it}_ne2;
${body}
}`
  }
}

const unaryExpr = (op: Op, x: string): string => {
  switch (op._tag) {
    case "Scale":
      return `${x} * P.s`
    case "Sqr":
      return `${x} * ${x}`
    case "Sqrt":
      return `sqrt(${x})`
    case "Exp":
      return `exp(${x})`
    case "Log":
      return `log(${x})`
    case "Clamp":
      return `clamp(${x}, P.lo, P.hi)`
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

const binaryOp: Record<string, string> = { Add: "+", Sub: "-", Mul: "*", Div: "/" }

/**
 * Threads per row-workgroup for rows of `n`: WG on GPUs; on a software adapter, where every invocation
 * costs, a power of two giving each thread about 16 elements (at least 8 threads), so a row of 32 does not
 * run 256 invocations (lavapipe ran the quick transformer block's soft_max of 32-wide rows at 3.4 ms).
 */
const rowThreads = (n: number, caps: Caps): number => caps.software === true ? threadsFor(n / 16) : WG

/** a power of two of threads, 8 to WG, nearest above `threads` */
const threadsFor = (threads: number) => Math.min(WG, Math.max(8, 2 ** Math.ceil(Math.log2(Math.max(1, threads)))))

/**
 * rows of a tensor: one workgroup each, of `threads` threads (else `rowThreads`), which bodies and
 * reductions know as the WGSL constant RW; with a shared-memory reduction helper
 */
const rowwise = (
  key: string,
  operands: ReadonlyArray<Operand>,
  it: string,
  body: string,
  params: ReadonlyArray<Param>,
  caps: Caps,
  threads?: number
): Kernel => {
  const t = operands.find((o) => o.name === it)!.tensor
  const sg = caps.subgroups === true
  const wg = threads ?? rowThreads(t.ne[0], caps)
  return {
    key: `row:${key}:${sg ? "sg" : ""}${wg === WG ? "" : `:w${wg}`}`,
    ...(sg ? { enables: ["subgroups"] } : {}),
    operands,
    params,
    workgroups: fold(T.nrows(t), caps.maxWorkgroups),
    main: `
const RW = ${wg}u;
var<workgroup> red: array<f32, ${wg}>;
var<workgroup> redi: array<u32, ${wg}>;
${reductions(sg)}
${(sg ? SUBGROUP_ENTRY : ENTRY).replace(`@workgroup_size(${WG})`, `@workgroup_size(${wg})`)}
  let row = wg_linear(wid, nwg);
  if (row >= P.${it}_ne1 * P.${it}_ne2 * P.${it}_ne3) { return; }
  let i1 = row % P.${it}_ne1;
  let i2 = (row / P.${it}_ne1) % P.${it}_ne2;
  let i3 = row / (P.${it}_ne1 * P.${it}_ne2);
  let n = P.${it}_ne0;
${body}
}`
  }
}

/** a workgroup reduction `reduce_<name>` with `combine(x, y)`, in registers over subgroups where `sub` (the
 * subgroup builtin) is given (2 barriers), else through a shared-memory tree (log2(RW) barriers) */
const reduction = (name: string, combine: (x: string, y: string) => string, sub: string | undefined) =>
  sub !== undefined
    ? `
fn reduce_${name}(lid: u32, v: f32) -> f32 {
  let s = ${sub}(v);
  if (sgl == 0u) { red[lid / sgs] = s; }
  workgroupBarrier();
  var r = red[0];
  for (var k = 1u; k < RW / sgs; k++) { r = ${combine("r", "red[k]")}; }
  workgroupBarrier();
  return r;
}`
    : `
fn reduce_${name}(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = RW / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = ${combine("red[lid]", "red[lid + s]")}; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}`

/** reduce_sum and reduce_max for the row kernels */
const reductions = (sg: boolean) =>
  [
    sg ? SUBGROUP_LANES : "",
    reduction("sum", (x, y) => `${x} + ${y}`, sg ? "subgroupAdd" : undefined),
    reduction("max", (x, y) => `max(${x}, ${y})`, sg ? "subgroupMax" : undefined)
  ].join("\n")

/** rows of up to this many elements per thread are read once, into registers */
const CACHED_ROW = 16

/**
 * How a row kernel keeps a row of `n` elements in registers: R per thread, and whether every thread's R
 * are all inside the row (n a multiple of the row's threads), so no load or store needs a bounds guard.
 * The guard matters beyond its cost: the H100 ran the guarded soft_max at 1.3-1.5 TB/s with its input
 * bound read_write (as when input and result share the compute buffer), 2.0-2.2 unguarded
 * (`bench/row-variants.ts`).
 */
const cachedRow = (n: number, caps: Caps) => {
  const wg = rowThreads(n, caps)
  const R = Math.ceil(n / wg)
  return { R, cached: R <= CACHED_ROW, full: n % wg === 0 }
}

/**
 * WGSL: `body(i, r)` for each of a thread's R elements (or vec4s) of the row, guarded by `i < limit` unless
 * the row is `full`
 */
const eachCached = (R: number, full: boolean, body: (i: string, r: string) => string, limit = "n") =>
  `  for (var r = 0u; r < ${R}u; r++) {
    let i = lid + r * RW;
    ${full ? body("i", "r") : `if (i < ${limit}) { ${body("i", "r")} }`}
  }`

/**
 * Threads per row of `n` for the vec4 row kernels of software adapters: about VEC_ROW vec4s each (at least
 * 8 threads). On lavapipe a soft_max over 16 rows of 4096 ran in 160-200 us with 32-64 threads loading vec4s,
 * against 460-580 us with 256 threads loading scalars, the layout of the scalar kernel
 * (`bench/row-variants.ts`, T=32,64,256)
 */
const VEC_ROW = 16
const vecRowThreads = (n: number) => threadsFor(n / 4 / VEC_ROW)

/** rows of `t` that are contiguous, of a multiple of 4 elements, with row strides that are too */
const vecRows = (t: Tensor) => t.ne[0] % 4 === 0 && stridesAligned(t, 4)

const softMax = (node: Tensor, op: Extract<Op, { _tag: "SoftMax" }>, caps: Caps): Kernel => {
  const a = node.src[0]
  const mask = node.src[1]
  const operands: Array<Operand> = [{ name: "a", tensor: a }, { name: "d", tensor: node }]
  if (mask) operands.push({ name: "m", tensor: mask })
  const nHead = a.ne[2]
  const nHeadLog2 = 2 ** Math.floor(Math.log2(Math.max(nHead, 1)))
  const maskTerm = mask ? " + slope * ld_m(ix_m(i, i1, i2 % P.m_ne2, i3 % P.m_ne3))" : ""
  // rows of up to CACHED_ROW elements per thread stay in registers: one read and one write per element
  const { R, cached, full } = cachedRow(a.ne[0], caps)
  const body = cached
    ? `
  var vals: array<f32, ${R}>;
  var mx = neg_inf();
${
      eachCached(R, full, (i, r) =>
        `let v = ld_a(ix_a(${i}, i1, i2, i3)) * P.scale${maskTerm}; vals[${r}] = v; mx = max(mx, v);`)
    }
  mx = reduce_max(lid, mx);
  var s = 0.0;
${eachCached(R, full, (_, r) => `let e = exp(vals[${r}] - mx); vals[${r}] = e; s += e;`)}
  let inv = 1.0 / reduce_sum(lid, s);
${eachCached(R, full, (i, r) => `st_d(ix_d(${i}, i1, i2, i3), vals[${r}] * inv);`)}`
    : `
  var mx = neg_inf();
  for (var i = lid; i < n; i += RW) { mx = max(mx, ld_a(ix_a(i, i1, i2, i3)) * P.scale${maskTerm}); }
  mx = reduce_max(lid, mx);
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { s += exp(ld_a(ix_a(i, i1, i2, i3)) * P.scale${maskTerm} - mx); }
  s = reduce_sum(lid, s);
  for (var i = lid; i < n; i += RW) {
    st_d(ix_d(i, i1, i2, i3), exp(ld_a(ix_a(i, i1, i2, i3)) * P.scale${maskTerm} - mx) / s);
  }`
  const scalar = rowwise(
    `soft_max:${mask ? "mask" : ""}:${cached ? `${R}${full ? "f" : ""}` : "long"}`,
    operands,
    "a",
    `
  var slope = 1.0;
  if (P.max_bias > 0.0) {
    let h = f32(i2);
    let hl = f32(P.n_head_log2);
    if (i2 < P.n_head_log2) { slope = pow(pow(2.0, -P.max_bias / hl), h + 1.0); }
    else { slope = pow(pow(2.0, -(P.max_bias / 2.0) / hl), 2.0 * (h - hl) + 1.0); }
  }${body}`,
    [f32("scale", op.scale), f32("max_bias", op.maxBias), u32("n_head_log2", nHeadLog2)],
    caps
  )
  if (caps.software !== true || mask !== undefined || !vecRows(a) || !vecRows(node)) return scalar
  // a software adapter, no mask, 4-aligned rows: each thread keeps VEC_ROW vec4s of the row (the scalar
  // kernel runs where the offsets turn out not to be 4-aligned)
  const n4 = a.ne[0] / 4
  const wg = vecRowThreads(a.ne[0])
  const R4 = Math.ceil(n4 / wg)
  const full4 = n4 % wg === 0
  const each = (body: (i: string, r: string) => string) => eachCached(R4, full4, body, "n4")
  const vecBody = `
  let ba = ix_a(0u, i1, i2, i3) >> 2u;
  let bd = ix_d(0u, i1, i2, i3) >> 2u;
  let n4 = n >> 2u;
  var vals: array<vec4<f32>, ${R4}>;
  var mx = neg_inf();
${
    each((i, r) =>
      `let v = ld4_a(ba + ${i}) * P.scale; vals[${r}] = v; mx = max(mx, max(max(v.x, v.y), max(v.z, v.w)));`
    )
  }
  mx = reduce_max(lid, mx);
  var s = 0.0;
${each((_, r) => `let e = exp(vals[${r}] - vec4<f32>(mx)); vals[${r}] = e; s += dot(e, vec4<f32>(1.0));`)}
  let inv = 1.0 / reduce_sum(lid, s);
${each((i, r) => `st4_d(bd + ${i}, vals[${r}] * inv);`)}`
  return {
    ...rowwise(`soft_max:v4:${R4}${full4 ? "f" : ""}`, operands, "a", vecBody, scalar.params, caps, wg),
    vec4: true,
    scalar
  }
}

/** rms_norm, optionally over a sum (add_rms_norm) and times a weight (fused mul) */
const rmsNorm = (node: Tensor, eps: number, sum: boolean, mul: boolean, caps: Caps): Kernel => {
  const operands: Array<Operand> = [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }]
  let k = 1
  if (sum) operands.push({ name: "b", tensor: node.src[k++] })
  if (mul) operands.push({ name: "w", tensor: node.src[k++] })
  const x = sum ? `(ld_a(ix_a(i, i1, i2, i3)) + ld_b(${bcast("b", "i")}))` : "ld_a(ix_a(i, i1, i2, i3))"
  const w = mul ? ` * ld_w(${bcast("w", "i")})` : ""
  // a row of up to CACHED_ROW elements per thread is read once, into registers; longer rows twice
  const { R, cached, full } = cachedRow(node.src[0].ne[0], caps)
  const body = cached
    ? `
  var vals: array<f32, ${R}>;
  var s = 0.0;
${eachCached(R, full, (_, r) => `let v = ${x}; vals[${r}] = v; s += v * v;`)}
  s = reduce_sum(lid, s);
  let scale = 1.0 / sqrt(s / f32(n) + P.eps);
${eachCached(R, full, (i, r) => `st_d(ix_d(${i}, i1, i2, i3), vals[${r}] * scale${w});`)}`
    : `
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { let v = ${x}; s += v * v; }
  s = reduce_sum(lid, s);
  let scale = 1.0 / sqrt(s / f32(n) + P.eps);
  for (var i = lid; i < n; i += RW) { st_d(ix_d(i, i1, i2, i3), ${x} * scale${w}); }`
  return rowwise(
    `rms_norm:${sum}:${mul}:${cached ? `${R}${full ? "f" : ""}` : "long"}`,
    operands,
    "a",
    body,
    [f32("eps", eps)],
    caps
  )
}

/** contiguous operands of one shape (src1 may repeat one row): flat indices, 4 steps per thread */
const FLAT = 4

/**
 * The flat kernel, on scalars (`width` 1) or vec4s (`width` 4: bindings are vec4 arrays, offsets and
 * sizes are divided by 4; it falls back to the scalar form when an operand is not 4-aligned).
 */
const flatKernel = (
  width: 1 | 4,
  key: string,
  operands: ReadonlyArray<Operand>,
  expr: string,
  rowBroadcast: boolean,
  params: ReadonlyArray<Param>,
  caps: Caps
): Kernel => {
  const n = T.nelements(operands[operands.length - 1].tensor)
  const [ld, st, q] = width === 4 ? ["ld4", "st4", " / 4u"] : ["ld", "st", ""]
  const b = rowBroadcast ? `P.b_o${q} + i % (P.b_ne0${q})` : `P.b_o${q} + i`
  const binary = operands.some((o) => o.name === "b")
  const vt = width === 4 ? "vec4<f32>" : "f32"
  const kernel: Kernel = {
    key: `${width === 4 ? "flat4" : "flat"}:${key}:${rowBroadcast}`,
    operands,
    params,
    workgroups: fold(Math.ceil(n / width / (WG * FLAT)), caps.maxWorkgroups),
    main: `
${ENTRY}
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
  }
  return width === 4
    ? { ...kernel, vec4: true, scalar: flatKernel(1, key, operands, expr, rowBroadcast, params, caps) }
    : kernel
}

/** flat4 where the sizes allow it, else flat */
const flatBest = (
  key: string,
  operands: ReadonlyArray<Operand>,
  expr: string,
  expr4: string | undefined,
  rowBroadcast: boolean,
  params: ReadonlyArray<Param>,
  caps: Caps
): Kernel => {
  const n = T.nelements(operands[operands.length - 1].tensor)
  const b = operands.find((o) => o.name === "b")
  const fits = expr4 !== undefined && n % 4 === 0 && (b === undefined || !rowBroadcast || b.tensor.ne[0] % 4 === 0)
  return fits
    ? flatKernel(4, key, operands, expr4, rowBroadcast, params, caps)
    : flatKernel(1, key, operands, expr, rowBroadcast, params, caps)
}

/** the flat path applies: everything contiguous, src1 the same shape or one repeated row */
const flatBinary = (node: Tensor): "same" | "row" | undefined => {
  const [a, b] = node.src
  if (!T.isContiguous(node) || !T.isContiguous(a) || !T.isContiguous(b)) return undefined
  if (T.sameShape(a, b)) return "same"
  return b.ne[0] === a.ne[0] && T.nelements(b) === b.ne[0] ? "row" : undefined
}

/** @internal: the kernel for a node, or undefined when this backend has none */
export const kernelFor = (node: Tensor, caps: Caps): Kernel | undefined => {
  const op = node.op
  const src = node.src
  const d: Operand = { name: "d", tensor: node }
  const a: Operand = { name: "a", tensor: src[0] }
  switch (op._tag) {
    case "Add":
    case "Sub":
    case "Mul":
    case "Div": {
      const f = flatBinary(node)
      if (f !== undefined) {
        return flatBest(
          op._tag,
          [a, { name: "b", tensor: src[1] }, d],
          `x ${binaryOp[op._tag]} y`,
          `x ${binaryOp[op._tag]} y`,
          f === "row",
          [],
          caps
        )
      }
      return elementwise(
        op._tag,
        [a, { name: "b", tensor: src[1] }, d],
        "d",
        `  st_d(ix_d(i0, i1, i2, i3), ld_a(ix_a(i0, i1, i2, i3)) ${binaryOp[op._tag]} ld_b(${bcast("b")}));`,
        [],
        caps
      )
    }
    case "Scale":
    case "Sqr":
    case "Sqrt":
    case "Exp":
    case "Log":
    case "Clamp":
    case "Cpy":
    case "Cont":
    case "Unary": {
      const params = op._tag === "Scale"
        ? [f32("s", op.s)]
        : op._tag === "Clamp"
        ? [f32("lo", op.min), f32("hi", op.max)]
        : []
      const name = op._tag === "Unary" ? op.kind : op._tag
      if (node.dtype === "i32" || src[0].dtype === "i32") {
        return elementwise(
          `copy_i32`,
          [a, d],
          "d",
          `  st_d(ix_d(i0, i1, i2, i3), ldi_a(ix_a(i0, i1, i2, i3)));`,
          [],
          caps
        )
      }
      if (T.isContiguous(node) && T.isContiguous(src[0])) {
        // WGSL's exp, sqrt, log, max and arithmetic work on vec4s too
        const vectorizable = op._tag === "Scale" || op._tag === "Cpy" || op._tag === "Cont" || op._tag === "Sqr" ||
          op._tag === "Exp" || op._tag === "Sqrt" || op._tag === "Log" || (op._tag === "Unary" && op.kind === "relu")
        const x4 = op._tag === "Unary" && op.kind === "relu" ? "max(x, vec4<f32>(0.0))" : unaryExpr(op, "x")
        return flatBest(name, [a, d], unaryExpr(op, "x"), vectorizable ? x4 : undefined, false, params, caps)
      }
      return elementwise(
        name,
        [a, d],
        "d",
        `  let x = ld_a(ix_a(i0, i1, i2, i3));\n  st_d(ix_d(i0, i1, i2, i3), ${unaryExpr(op, "x")});`,
        params,
        caps
      )
    }
    case "Concat":
      return elementwise(
        "concat",
        [a, { name: "b", tensor: src[1] }, d],
        "d",
        `  var i = vec4<u32>(i0, i1, i2, i3);
  let an = vec4<u32>(P.a_ne0, P.a_ne1, P.a_ne2, P.a_ne3);
  var v = 0.0;
  if (i[P.dim] < an[P.dim]) { v = ld_a(ix_a(i0, i1, i2, i3)); }
  else { i[P.dim] -= an[P.dim]; v = ld_b(ix_b(i.x, i.y, i.z, i.w)); }
  st_d(ix_d(i0, i1, i2, i3), v);`,
        [u32("dim", op.dim)],
        caps
      )
    case "Pad":
      return elementwise(
        "pad",
        [a, d],
        "d",
        `  var v = 0.0;
  if (i0 < P.a_ne0 && i1 < P.a_ne1 && i2 < P.a_ne2 && i3 < P.a_ne3) { v = ld_a(ix_a(i0, i1, i2, i3)); }
  st_d(ix_d(i0, i1, i2, i3), v);`,
        [],
        caps
      )
    case "Repeat":
      return elementwise(
        "repeat",
        [a, d],
        "d",
        `  st_d(ix_d(i0, i1, i2, i3), ld_a(${bcast("a")}));`,
        [],
        caps
      )
    case "DiagMaskInf":
      return elementwise(
        "diag_mask_inf",
        [a, d],
        "d",
        `  var v = ld_a(ix_a(i0, i1, i2, i3));
  if (i0 > P.n_past + i1) { v = neg_inf(); }
  st_d(ix_d(i0, i1, i2, i3), v);`,
        [u32("n_past", op.nPast)],
        caps
      )
    case "GetRows":
      return elementwise(
        "get_rows",
        [a, { name: "x", tensor: src[1] }, d],
        "d",
        node.dtype === "i32"
          ? `  let r = u32(ldi_x(ix_x(i1, i2, i3, 0u)));\n  st_d(ix_d(i0, i1, i2, i3), ldi_a(ix_a(i0, r, i2, i3)));`
          : `  let r = u32(ldi_x(ix_x(i1, i2, i3, 0u)));\n  st_d(ix_d(i0, i1, i2, i3), ld_a(ix_a(i0, r, i2, i3)));`,
        [],
        caps
      )
    case "SetRows":
      // iterates over the source rows; d is a view of the destination
      return elementwise(
        "set_rows",
        [{ name: "s", tensor: src[1] }, { name: "x", tensor: src[2] }, d],
        "s",
        `  let r = u32(ldi_x(ix_x(i1, i2 % P.x_ne1, i3 % P.x_ne2, 0u)));
  st_d(ix_d(i0, r, i2, i3), ld_s(ix_s(i0, i1, i2, i3)));`,
        [],
        caps
      )
    case "Glu": {
      const act = op.kind === "swiglu" ? "silu_s" : "gelu_s"
      if (src.length > 1) {
        const [x, y] = op.swapped ? ["g", "a"] : ["a", "g"]
        return elementwise(
          `glu_split:${op.kind}:${op.swapped}`,
          [a, { name: "g", tensor: src[1] }, d],
          "d",
          `  st_d(ix_d(i0, i1, i2, i3), ${act}(ld_${x}(ix_${x}(i0, i1, i2, i3))) * ld_${y}(ix_${y}(i0, i1, i2, i3)));`,
          [],
          caps
        )
      }
      const [ox, oy] = op.swapped ? ["P.d_ne0", "0u"] : ["0u", "P.d_ne0"]
      return elementwise(
        `glu:${op.kind}:${op.swapped}`,
        [a, d],
        "d",
        `  st_d(ix_d(i0, i1, i2, i3), ${act}(ld_a(ix_a(i0 + ${ox}, i1, i2, i3))) * ld_a(ix_a(i0 + ${oy}, i1, i2, i3)));`,
        [],
        caps
      )
    }
    case "Rope": {
      // one thread per pair, so an in-place rope reads both elements before writing either
      const pairs = Math.ceil(node.ne[0] / 2)
      const pairIdx = op.mode === 0 ? ["2u * j", "2u * j + 1u"] : ["j", "j + half"]
      return {
        key: `rope:${op.mode}`,
        operands: [a, { name: "p", tensor: src[1] }, d],
        workgroups: fold(Math.ceil((pairs * T.nrows(node)) / WG), caps.maxWorkgroups),
        params: [f32("freq_base", op.freqBase), f32("freq_scale", op.freqScale), u32("n_dims", op.nDims)],
        main: `
${ENTRY}
  let idx = wg_linear(wid, nwg) * ${WG}u + lid;
  let pairs = (P.d_ne0 + 1u) / 2u;
  if (idx >= pairs * P.d_ne1 * P.d_ne2 * P.d_ne3) { return; }
  let j = idx % pairs;
  let r1 = idx / pairs;
  let i1 = r1 % P.d_ne1;
  let i2 = (r1 / P.d_ne1) % P.d_ne2;
  let i3 = r1 / (P.d_ne1 * P.d_ne2);
  let half = P.n_dims / 2u;
  if (j < half) {
    let j0 = ${pairIdx[0]};
    let j1 = ${pairIdx[1]};
    let pos = f32(ldi_p(ix_p(i2, 0u, 0u, 0u)));
    let theta = pos * P.freq_scale * pow(P.freq_base, -2.0 * f32(j) / f32(P.n_dims));
    let c = cos(theta);
    let s = sin(theta);
    let x0 = ld_a(ix_a(j0, i1, i2, i3));
    let x1 = ld_a(ix_a(j1, i1, i2, i3));
    st_d(ix_d(j0, i1, i2, i3), x0 * c - x1 * s);
    st_d(ix_d(j1, i1, i2, i3), x0 * s + x1 * c);
  } else {
    for (var e = 2u * j; e < min(2u * j + 2u, P.d_ne0); e++) {
      if (e >= P.n_dims) { st_d(ix_d(e, i1, i2, i3), ld_a(ix_a(e, i1, i2, i3))); }
    }
  }
}`
      }
    }
    case "MulMat":
      return mulMat(node, caps, undefined)
    case "MulMatAdd":
      return mulMat(node, caps, src[2])
    case "SoftMax":
      return softMax(node, op, caps)
    case "RmsNorm":
      return rmsNorm(node, op.eps, false, false, caps)
    case "RmsNormMul":
      return rmsNorm(node, op.eps, false, true, caps)
    case "AddRmsNorm":
      return rmsNorm(node, op.eps, true, op.withMul, caps)
    case "Norm":
      return rowwise(
        "norm",
        [a, d],
        "a",
        `
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { s += ld_a(ix_a(i, i1, i2, i3)); }
  let mean = reduce_sum(lid, s) / f32(n);
  var v = 0.0;
  for (var i = lid; i < n; i += RW) { let x = ld_a(ix_a(i, i1, i2, i3)) - mean; v += x * x; }
  let scale = 1.0 / sqrt(reduce_sum(lid, v) / f32(n) + P.eps);
  for (var i = lid; i < n; i += RW) { st_d(ix_d(i, i1, i2, i3), (ld_a(ix_a(i, i1, i2, i3)) - mean) * scale); }`,
        [f32("eps", op.eps)],
        caps
      )
    case "SumRows":
    case "Mean":
      return rowwise(
        op._tag,
        [a, d],
        "a",
        `
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { s += ld_a(ix_a(i, i1, i2, i3)); }
  s = reduce_sum(lid, s);
  if (lid == 0u) { st_d(ix_d(0u, i1, i2, i3), ${op._tag === "Mean" ? "s / f32(n)" : "s"}); }`,
        [],
        caps
      )
    case "Argmax":
      return rowwise(
        "argmax",
        [a, d],
        "a",
        `
  var best = neg_inf();
  var bi = 0xffffffffu;
  for (var i = lid; i < n; i += RW) {
    let v = ld_a(ix_a(i, i1, i2, i3));
    if (v > best || bi == 0xffffffffu) { best = v; bi = i; }
  }
  red[lid] = best;
  redi[lid] = bi;
  workgroupBarrier();
  for (var s = RW / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      let ov = red[lid + s];
      let oi = redi[lid + s];
      if (oi != 0xffffffffu && (redi[lid] == 0xffffffffu || ov > red[lid] || (ov == red[lid] && oi < redi[lid]))) {
        red[lid] = ov;
        redi[lid] = oi;
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) { st_d(ix_d(i1, 0u, 0u, 0u), i32(redi[0])); }`,
        [],
        caps
      )
    case "Cumsum":
      // each thread scans a contiguous chunk; chunk totals are scanned in shared memory
      return rowwise(
        "cumsum",
        [a, d],
        "a",
        `
  let chunk = (n + RW - 1u) / RW;
  let start = lid * chunk;
  let end = min(start + chunk, n);
  var t = 0.0;
  for (var i = start; i < end; i++) { t += ld_a(ix_a(i, i1, i2, i3)); }
  red[lid] = t;
  workgroupBarrier();
  for (var off = 1u; off < RW; off <<= 1u) {
    var add = 0.0;
    if (lid >= off) { add = red[lid - off]; }
    workgroupBarrier();
    red[lid] += add;
    workgroupBarrier();
  }
  var acc = red[lid] - t;
  for (var i = start; i < end; i++) { acc += ld_a(ix_a(i, i1, i2, i3)); st_d(ix_d(i, i1, i2, i3), acc); }`,
        [],
        caps
      )
    case "Sum":
      return {
        key: "sum",
        operands: [a, d],
        params: [],
        workgroups: [1, 1, 1],
        main: `
var<workgroup> red: array<f32, ${WG}>;
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_index) lid: u32) {
  let n = P.a_ne0 * P.a_ne1 * P.a_ne2 * P.a_ne3;
  var s = 0.0;
  for (var idx = lid; idx < n; idx += ${WG}u) {
    let i0 = idx % P.a_ne0;
    let r1 = idx / P.a_ne0;
    s += ld_a(ix_a(i0, r1 % P.a_ne1, (r1 / P.a_ne1) % P.a_ne2, r1 / (P.a_ne1 * P.a_ne2)));
  }
  red[lid] = s;
  workgroupBarrier();
  for (var k = ${WG / 2}u; k > 0u; k >>= 1u) {
    if (lid < k) { red[lid] += red[lid + k]; }
    workgroupBarrier();
  }
  if (lid == 0u) { st_d(ix_d(0u, 0u, 0u, 0u), red[0]); }
}`
      }
    case "Argsort":
    case "TopK": {
      // rank of each element in its row (ties by index): argsort writes i at its rank, top_k the first k
      const desc = op._tag === "TopK" || op.order === "desc"
      const before = desc ? "(y > x || (y == x && j < i0))" : "(y < x || (y == x && j < i0))"
      const k = op._tag === "TopK" ? op.k : node.ne[0]
      return elementwise(
        `${op._tag}:${desc}`,
        [a, d],
        "a",
        `  let x = ld_a(ix_a(i0, i1, i2, i3));
  var rank = 0u;
  for (var j = 0u; j < P.a_ne0; j++) {
    let y = ld_a(ix_a(j, i1, i2, i3));
    if ${before} { rank++; }
  }
  if (rank < P.k) { st_d(ix_d(rank, i1, i2, i3), i32(i0)); }`,
        [u32("k", k)],
        caps
      )
    }
    case "None":
    case "View":
    case "Reshape":
    case "Permute":
    case "Transpose":
      return undefined
  }
}

/** element-wise ops that a chain kernel can evaluate one after another on a register */
const chainOps = new Set(["Add", "Sub", "Mul", "Div", "Scale", "Sqr", "Sqrt", "Exp", "Log", "Unary", "Clamp"])

/** @internal: a node the chain fusion may take: contiguous, f32/f16, src0 the running value */
export const chainable = (node: Tensor): boolean => {
  if (!chainOps.has(node.op._tag) || (node.dtype !== "f32" && node.dtype !== "f16")) return false
  if (!T.isContiguous(node) || !T.isContiguous(node.src[0]) || !T.sameShape(node, node.src[0])) return false
  return node.src.length === 1 || flatBinary(node) !== undefined
}

/** @internal: the most distinct inputs one chain kernel binds */
export const CHAIN_INPUTS = 5

/**
 * @internal: one kernel for a chain of element-wise nodes, each reading the previous one's result as
 * src0; the intermediate results stay in registers and are never written.
 */
export const chainKernel = (chain: ReadonlyArray<Tensor>, caps: Caps): Kernel => {
  const inputs: Array<Tensor> = [chain[0].src[0]]
  const input = (t: Tensor) => {
    let k = inputs.indexOf(t)
    if (k < 0) k = inputs.push(t) - 1
    return k
  }
  const params: Array<Param> = []
  const sig: Array<string> = []
  const steps = chain.map((node, j) => {
    const op = node.op
    if (node.src.length > 1) {
      const k = input(node.src[1])
      const row = flatBinary(node) === "row"
      sig.push(`${op._tag}${k}${row ? "r" : ""}`)
      return `      v = v ${binaryOp[op._tag]} ld_x${k}(P.x${k}_o + ${row ? `i % P.x${k}_ne0` : "i"});`
    }
    if (op._tag === "Scale") params.push(f32(`s${j}`, op.s))
    if (op._tag === "Clamp") params.push(f32(`lo${j}`, op.min), f32(`hi${j}`, op.max))
    sig.push(op._tag === "Unary" ? op.kind : op._tag)
    return `      v = ${
      unaryExpr(op, "v").replace("P.s", `P.s${j}`).replace("P.lo", `P.lo${j}`).replace("P.hi", `P.hi${j}`)
    };`
  })
  const last = chain[chain.length - 1]
  const n = T.nelements(last)
  return {
    key: `chain:${sig.join(",")}`,
    operands: [...inputs.map((t, k) => ({ name: `x${k}`, tensor: t })), { name: "d", tensor: last }],
    params,
    workgroups: fold(Math.ceil(n / (WG * FLAT)), caps.maxWorkgroups),
    main: `
${ENTRY}
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
  }
}
