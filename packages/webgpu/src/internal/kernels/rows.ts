/**
 * Row kernels: one workgroup per row (dimension 0), with workgroup reductions over subgroups where the
 * device has them, else through shared memory. soft_max, rms_norm (fused with an add before and a mul
 * after), norm, sum_rows, mean, argmax, cumsum, and sum over a whole tensor. Short rows stay in
 * registers: read once, written once.
 *
 * @internal
 */
import type { Op } from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { Kernel, KernelTarget, Operand, Param, Variant } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import {
  bcast,
  bcastForm,
  entry,
  f32,
  range,
  repeat,
  stridesAligned,
  SUBGROUP_LANES,
  u32,
  WG,
  writesOut
} from "./kernel.js"
import { alibiSlope, headLog2, workgroupReductions } from "./reduce.js"

/**
 * Threads per row-workgroup for `rows` rows of `n`: on GPUs WG, or where the rows are too few to fill the
 * GPU (a decoding step's norms) up to a thread per 4 elements, as many as a workgroup may have (faster
 * decoding, benchmarks/RESULTS.md, choices: the model's graph); on
 * a software adapter, where every invocation costs, a power of two giving each thread about 16 elements (at
 * least 8 threads), so a row of 32 does not run 256 invocations (benchmarks/RESULTS.md, lavapipe).
 */
const rowThreads = (n: number, target: KernelTarget, rows = Infinity): number => {
  if (target.rowThreads !== undefined) return target.rowThreads
  if (target.software === true) return threadsFor(n / 16)
  if (rows > FEW_ROWS) return WG
  return Math.max(WG, Math.min(target.workgroupInvocations ?? WG, 2 ** Math.ceil(Math.log2(Math.max(1, n / 4)))))
}

/** rows below which a row kernel's workgroups widen: fewer than the GPU's multiprocessors, about */
const FEW_ROWS = 64

/** a power of two of threads, 8 to WG, nearest above `threads` */
const threadsFor = (threads: number) => Math.min(WG, Math.max(8, 2 ** Math.ceil(Math.log2(Math.max(1, threads)))))

/**
 * rows of a tensor: one workgroup each, of `threads` threads (else `rowThreads`), which bodies and
 * reductions know as the WGSL constant RW; with the workgroup reductions `reduce_sum` and `reduce_max`
 */
const rowwise = (
  choices: { readonly op: string } & Record<string, string | number | boolean>,
  operands: ReadonlyArray<Operand>,
  it: string,
  body: string,
  params: ReadonlyArray<Param>,
  target: KernelTarget,
  threads?: number
): Kernel => {
  const t = operands.find((o) => o.name === it)!.tensor
  const subgroups = target.subgroups === true
  const wg = threads ?? rowThreads(t.ne[0], target, Tensor.nrows(t))
  const ne = (i: number) => `P.${it}_ne${i}`
  const variant: Variant = { family: "row", ...choices, subgroups, threads: wg }
  return KernelSpec.make({
    variant,
    ...(subgroups ? { enables: ["subgroups"] } : {}),
    operands,
    params,
    workgroups: fold(Tensor.nrows(t), target.maxWorkgroups),
    main: `
${workgroupReductions(wg, subgroups)}
${entry(wg, subgroups)}
  let row = wg_linear(wid, nwg);
  if (row >= ${ne(1)} * ${ne(2)} * ${ne(3)}) { return; }
  let i1 = row % ${ne(1)};
  let i2 = (row / ${ne(1)}) % ${ne(2)};
  let i3 = row / (${ne(1)} * ${ne(2)});
  let n = ${ne(0)};
${body}
}`
  })
}

/** rows of up to this many elements per thread are read once, into registers */
const CACHED_ROW = 16

/**
 * How a row kernel keeps each row of `t` in registers: R per thread, and whether every thread's R
 * are all inside the row (n a multiple of the row's threads), so no load or store needs a bounds guard.
 * The guard matters beyond its cost: a guarded soft_max with its input bound read_write ran at two thirds
 * of the unguarded one's bandwidth on an H100 (benchmarks/RESULTS.md, row kernels).
 */
const cachedRow = (t: Tensor.Tensor, target: KernelTarget) => {
  const n = t.ne[0]
  const wg = rowThreads(n, target, Tensor.nrows(t))
  const R = Math.ceil(n / wg)
  return { R, cached: R <= CACHED_ROW, full: n % wg === 0 }
}

/** how a row is held, as variants spell it: R per thread ("f" when the row fills them), else "long" */
const rowForm = ({ R, cached, full }: ReturnType<typeof cachedRow>) => cached ? `${R}${full ? "f" : ""}` : "long"

/**
 * WGSL: `body(i, r)` for each of a thread's R elements (or vec4s) of the row, guarded by `i < limit` unless
 * the row is `full`; written out where `writeOut` (GPUs: the loads go out together, where a loop's loads
 * waited on one another), else a loop
 */
const eachCached = (
  R: number,
  full: boolean,
  body: (i: string, r: string) => string,
  limit = "n",
  writeOut = false
) =>
  repeat(
    R,
    "r",
    writeOut,
    (r) => `let i = lid + ${r} * RW;\n${full ? body("i", r) : `if (i < ${limit}) { ${body("i", r)} }`}`
  )

/**
 * Threads per row of `n` for the vec4 row kernels of software adapters: about VEC_ROW vec4s each (at
 * least 8 threads): lavapipe, where every invocation costs, runs wide rows faster so than with 256
 * threads loading scalars (benchmarks/RESULTS.md, lavapipe)
 */
const VEC_ROW = 16
const vecRowThreads = (n: number) => threadsFor(n / 4 / VEC_ROW)

/** rows of `t` that are contiguous, of a multiple of 4 elements, with row strides that are too */
const vecRows = (t: Tensor.Tensor) => t.ne[0] % 4 === 0 && stridesAligned(t, 4)

/**
 * @internal: softmax(a * scale + slope * mask) over each row; a sink (one logit per head, i2) joins the
 * row's max and its denominator without an output of its own
 */
export const softMax = (
  node: Tensor.Tensor,
  op: Extract<Op, { _tag: "SoftMax" }>,
  target: KernelTarget
): Kernel => {
  const a = node.src[0]
  const mask = op.hasMask ? node.src[1] : undefined
  const sinks = op.hasSinks ? node.src[op.hasMask ? 2 : 1] : undefined
  const operands: Array<Operand> = [{ name: "a", tensor: a }, { name: "d", tensor: node }]
  if (mask) operands.push({ name: "m", tensor: mask })
  if (sinks) operands.push({ name: "k", tensor: sinks })
  const params = [f32("scale", op.scale), f32("max_bias", op.maxBias), u32("n_head_log2", headLog2(a.ne[2]))]
  const maskTerm = mask ? " + slope * ld_m(ix_m(i, i1, i2 % P.m_ne2, i3 % P.m_ne3))" : ""
  const x = (i: string) => `ld_a(ix_a(${i}, i1, i2, i3)) * P.scale${maskTerm}`
  // the sink joins after the row's max is reduced: every thread then holds the same max and adds it once
  const sinkMax = sinks ? "\n  let sink = ld_k(ix_k(i2, 0u, 0u, 0u));\n  mx = max(mx, sink);" : ""
  const sinkSum = sinks ? " + exp(sink - mx)" : ""
  // rows of up to CACHED_ROW elements per thread stay in registers: one read and one write per element
  const row = cachedRow(a, target)
  const unrolled = writesOut(target)
  const bySubgroup = subgroupRows(a.ne[0], target)
  if (bySubgroup !== undefined) return subgroupSoftMax(a, bySubgroup, operands, params, x, sinks !== undefined, target)
  const { R, full } = row
  const body = row.cached
    ? `
  var vals: array<f32, ${R}>;
  var mx = neg_inf();
${eachCached(R, full, (i, r) => `let v = ${x(i)}; vals[${r}] = v; mx = max(mx, v);`, "n", unrolled)}
  mx = reduce_max(lid, mx);${sinkMax}
  var s = 0.0;
${eachCached(R, full, (_, r) => `let e = exp(vals[${r}] - mx); vals[${r}] = e; s += e;`, "n", unrolled)}
  let inv = 1.0 / (reduce_sum(lid, s)${sinkSum});
${eachCached(R, full, (i, r) => `st_d(ix_d(${i}, i1, i2, i3), vals[${r}] * inv);`, "n", unrolled)}`
    : `
  var mx = neg_inf();
  for (var i = lid; i < n; i += RW) { mx = max(mx, ${x("i")}); }
  mx = reduce_max(lid, mx);${sinkMax}
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { s += exp(${x("i")} - mx); }
  s = reduce_sum(lid, s)${sinkSum};
  for (var i = lid; i < n; i += RW) {
    st_d(ix_d(i, i1, i2, i3), exp(${x("i")} - mx) / s);
  }`
  const scalar = rowwise(
    { op: "soft_max", mask: mask !== undefined, sinks: sinks !== undefined, form: rowForm(row), unrolled },
    operands,
    "a",
    alibiSlope("i2") + body,
    params,
    target
  )
  if (target.software !== true || mask !== undefined || sinks !== undefined || !vecRows(a) || !vecRows(node)) {
    return scalar
  }
  // a software adapter, no mask, 4-aligned rows: each thread keeps VEC_ROW vec4s of the row (the scalar
  // kernel runs where the offsets turn out not to be 4-aligned)
  const n4 = a.ne[0] / 4
  const wg = vecRowThreads(a.ne[0])
  const R4 = Math.ceil(n4 / wg)
  const full4 = n4 % wg === 0
  const each = (body: (i: string, r: string) => string) => eachCached(R4, full4, body, "n4")
  const max4 = "max(max(v.x, v.y), max(v.z, v.w))"
  const vecBody = `
  let ba = ix_a(0u, i1, i2, i3) >> 2u;
  let bd = ix_d(0u, i1, i2, i3) >> 2u;
  let n4 = n >> 2u;
  var vals: array<vec4<f32>, ${R4}>;
  var mx = neg_inf();
${each((i, r) => `let v = ld4_a(ba + ${i}) * P.scale; vals[${r}] = v; mx = max(mx, ${max4});`)}
  mx = reduce_max(lid, mx);
  var s = 0.0;
${each((_, r) => `let e = exp(vals[${r}] - vec4<f32>(mx)); vals[${r}] = e; s += dot(e, vec4<f32>(1.0));`)}
  let inv = 1.0 / reduce_sum(lid, s);
${each((i, r) => `st4_d(bd + ${i}, vals[${r}] * inv);`)}`
  const form = `v4:${R4}${full4 ? "f" : ""}`
  return {
    ...rowwise({ op: "soft_max", mask: false, sinks: false, form }, operands, "a", vecBody, params, target, wg),
    vec4: true,
    fallback: scalar
  }
}

/** elements a lane holds of a row that a subgroup takes alone */
const SUBGROUP_ROW = 32

/**
 * A row per subgroup, in registers (R elements a lane): the GPU form (writesOut) where the device's
 * subgroups have one size and rows are short. A workgroup per row of attention's scores (512 at a prompt)
 * gave each of its 256 threads two elements and two barriers, far below bandwidth (benchmarks/RESULTS.md,
 * choices: attention).
 */
const subgroupRows = (n: number, target: KernelTarget) => {
  const S = target.subgroupSize
  if (target.subgroups !== true || S === undefined || !writesOut(target) || WG % S !== 0) return undefined
  const R = Math.ceil(n / S)
  return R <= SUBGROUP_ROW ? { S, R, full: n % S === 0 } : undefined
}

/**
 * soft_max a row per subgroup (subgroupRows): `x(i)` the scaled, masked logit of element i; the sink, where
 * there is one, joins the max and the denominator. Subgroups are taken to lie along the local index, as the
 * subgroup-matrix kernels take them.
 */
const subgroupSoftMax = (
  a: Tensor.Tensor,
  { full, R, S }: { readonly S: number; readonly R: number; readonly full: boolean },
  operands: ReadonlyArray<Operand>,
  params: ReadonlyArray<Param>,
  x: (i: string) => string,
  sinks: boolean,
  target: KernelTarget
): Kernel => {
  const each = (body: (i: string, r: number) => string) =>
    range(R).map((r) => {
      const at = `let i = sgl + ${r * S}u;`
      return `  { ${at} ${full ? body("i", r) : `if (i < n) { ${body("i", r)} }`} }`
    }).join("\n")
  const perGroup = WG / S
  return KernelSpec.make({
    variant: {
      family: "row",
      op: "soft_max",
      mask: operands.some((o) => o.name === "m"),
      sinks,
      form: `sg${R}${full ? "f" : ""}`
    },
    enables: ["subgroups"],
    // a row's subgroup returns or goes on as one: its reductions are uniform where Tint cannot prove it
    diagnosticsOff: ["subgroup_uniformity"],
    operands,
    params,
    workgroups: fold(Math.ceil(Tensor.nrows(a) / perGroup), target.maxWorkgroups),
    main: `
${SUBGROUP_LANES}
${entry(WG, true)}
  let row = wg_linear(wid, nwg) * ${perGroup}u + lid / ${S}u;
  if (row >= P.a_ne1 * P.a_ne2 * P.a_ne3) { return; }
  let i1 = row % P.a_ne1;
  let i2 = (row / P.a_ne1) % P.a_ne2;
  let i3 = row / (P.a_ne1 * P.a_ne2);
  let n = P.a_ne0;
${alibiSlope("i2")}
  var vals: array<f32, ${R}>;
  var mx = neg_inf();
${each((i, r) => `let v = ${x(i)}; vals[${r}] = v; mx = max(mx, v);`)}
  mx = subgroupMax(mx);${sinks ? "\n  let sink = ld_k(ix_k(i2, 0u, 0u, 0u));\n  mx = max(mx, sink);" : ""}
  var s = 0.0;
${each((_, r) => `let e = exp(vals[${r}] - mx); vals[${r}] = e; s += e;`)}
  let inv = 1.0 / (subgroupAdd(s)${sinks ? " + exp(sink - mx)" : ""});
${each((i, r) => `st_d(ix_d(${i}, i1, i2, i3), vals[${r}] * inv);`)}
}`
  })
}

/**
 * @internal: rms_norm, optionally over a sum (add_rms_norm) and times a weight (fused mul); the sum stored
 * too where `kept`: beside the norm (each result row the sum's n values, then the norm's), or over the first
 * source (a row read whole before it is written)
 */
export const rmsNorm = (
  node: Tensor.Tensor,
  eps: number,
  sum: boolean,
  mul: boolean,
  target: KernelTarget,
  kept?: "beside" | "over",
  sums?: Kernel["sums"]
): Kernel => {
  const keep = kept === "beside"
  const operands: Array<Operand> = [{ name: "a", tensor: node.src[0], ...(kept === "over" ? { writes: true } : {}) }, {
    name: "d",
    tensor: node
  }]
  const keepSum = (i: string, v: string) =>
    keep ? `st_d(ix_d(${i}, i1, i2, i3), ${v}); ` : kept === "over" ? `st_a(ix_a(${i}, i1, i2, i3), ${v}); ` : ""
  const at = (i: string) => (keep ? `n + ${i}` : i)
  const a = node.src[0]
  const b = sum ? node.src[1] : undefined
  const weight = mul ? node.src[sum ? 2 : 1] : undefined
  // b's split-K partial sums in place of b (splitsIn.ts): b contiguous and of a's shape, the partials after it
  const partials = b !== undefined && sums !== undefined ? sums : undefined
  if (partials !== undefined && (!Tensor.isContiguous(b!) || bcastForm(b!, a) !== "====")) {
    throw new Error("partial sums are read only for a contiguous b of the row's shape")
  }
  if (b) {
    operands.push({
      name: "b",
      tensor: b,
      ...(partials ? { extent: Tensor.nbytes(b) + 4 * partials.splits * partials.count } : {})
    })
  }
  if (weight) operands.push({ name: "w", tensor: weight })
  const forms = { ...(b ? { bForm: bcastForm(b, a) } : {}), ...(weight ? { wForm: bcastForm(weight, a) } : {}) }
  const bValue = partials
    ? range(partials.splits).map((s) => `ld_b(ix_b(i, i1, i2, i3) + P.scratch + ${s * partials.count}u)`).join(" + ")
    : `ld_b(${bcast("b", "i", "i1", "i2", "i3", forms.bForm)})`
  const x = b ? `(ld_a(ix_a(i, i1, i2, i3)) + ${bValue})` : "ld_a(ix_a(i, i1, i2, i3))"
  const w = weight ? ` * ld_w(${bcast("w", "i", "i1", "i2", "i3", forms.wForm)})` : ""
  // a row of up to CACHED_ROW elements per thread is read once, into registers; longer rows twice
  const row = cachedRow(node.src[0], target)
  const unrolled = writesOut(target)
  const { R, full } = row
  const body = row.cached
    ? `
  var vals: array<f32, ${R}>;
  var s = 0.0;
${eachCached(R, full, (_, r) => `let v = ${x}; vals[${r}] = v; s += v * v;`, "n", unrolled)}
  s = reduce_sum(lid, s);
  let scale = 1.0 / sqrt(s / f32(n) + P.eps);
${
      eachCached(
        R,
        full,
        (i, r) => `${keepSum(i, `vals[${r}]`)}st_d(ix_d(${at(i)}, i1, i2, i3), vals[${r}] * scale${w});`,
        "n",
        unrolled
      )
    }`
    : `
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { let v = ${x}; s += v * v; }
  s = reduce_sum(lid, s);
  let scale = 1.0 / sqrt(s / f32(n) + P.eps);
  for (var i = lid; i < n; i += RW) { let v = ${x}; ${keepSum("i", "v")}st_d(ix_d(${
      at("i")
    }, i1, i2, i3), v * scale${w}); }`
  return rowwise(
    {
      op: "rms_norm",
      sum,
      mul,
      keep,
      ...(kept === "over" ? { store: true } : {}),
      ...(partials ? { partials: partials.splits } : {}),
      form: rowForm(row),
      unrolled,
      ...forms
    },
    operands,
    "a",
    body,
    [f32("eps", eps), ...(partials ? [u32("scratch", Tensor.nbytes(b!) / 4)] : [])],
    target
  )
}

/** @internal: (x - mean) / sqrt(var + eps) over each row */
export const norm = (node: Tensor.Tensor, eps: number, target: KernelTarget): Kernel =>
  rowwise(
    { op: "norm" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    "a",
    `
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { s += ld_a(ix_a(i, i1, i2, i3)); }
  let mean = reduce_sum(lid, s) / f32(n);
  var v = 0.0;
  for (var i = lid; i < n; i += RW) { let x = ld_a(ix_a(i, i1, i2, i3)) - mean; v += x * x; }
  let scale = 1.0 / sqrt(reduce_sum(lid, v) / f32(n) + P.eps);
  for (var i = lid; i < n; i += RW) { st_d(ix_d(i, i1, i2, i3), (ld_a(ix_a(i, i1, i2, i3)) - mean) * scale); }`,
    [f32("eps", eps)],
    target
  )

/** @internal: x / max(sqrt(sum x^2), eps) over each row */
export const l2Norm = (node: Tensor.Tensor, eps: number, target: KernelTarget): Kernel =>
  rowwise(
    { op: "l2_norm" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    "a",
    `
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { let x = ld_a(ix_a(i, i1, i2, i3)); s += x * x; }
  let scale = 1.0 / max(sqrt(reduce_sum(lid, s)), P.eps);
  for (var i = lid; i < n; i += RW) { st_d(ix_d(i, i1, i2, i3), ld_a(ix_a(i, i1, i2, i3)) * scale); }`,
    [f32("eps", eps)],
    target
  )

/**
 * @internal: group_norm: channels (dimension 2) in groups of ceil(ne2 / n_groups), the last one smaller;
 * one workgroup per group and i3 normalizes the group's ne0 x ne1 x channels elements by their mean and
 * biased variance (two passes, as the reference)
 */
export const groupNorm = (node: Tensor.Tensor, nGroups: number, eps: number, target: KernelTarget): Kernel => {
  const a = node.src[0]
  const perGroup = Math.ceil(a.ne[2] / nGroups)
  const groups = Math.ceil(a.ne[2] / perGroup)
  const subgroups = target.subgroups === true
  const wg = rowThreads(a.ne[0] * a.ne[1] * perGroup, target)
  const at = (f: (i0: string, i1: string, i2: string) => string) =>
    `let i0 = e % P.a_ne0; let i1 = (e / P.a_ne0) % P.a_ne1; let i2 = c0 + e / (P.a_ne0 * P.a_ne1); ${
      f("i0", "i1", "i2")
    }`
  return KernelSpec.make({
    variant: { family: "group_norm", subgroups, threads: wg },
    ...(subgroups ? { enables: ["subgroups"] } : {}),
    operands: [{ name: "a", tensor: a }, { name: "d", tensor: node }],
    params: [f32("eps", eps), u32("per_group", perGroup), u32("groups", groups)],
    workgroups: fold(groups * a.ne[3], target.maxWorkgroups),
    main: `
${workgroupReductions(wg, subgroups)}
${entry(wg, subgroups)}
  let gi = wg_linear(wid, nwg);
  if (gi >= P.groups * P.a_ne3) { return; }
  let i3 = gi / P.groups;
  let c0 = (gi % P.groups) * P.per_group;
  let n = min(P.per_group, P.a_ne2 - c0) * P.a_ne1 * P.a_ne0;
  var s = 0.0;
  for (var e = lid; e < n; e += RW) { ${at((i0, i1, i2) => `s += ld_a(ix_a(${i0}, ${i1}, ${i2}, i3));`)} }
  let mean = reduce_sum(lid, s) / f32(n);
  var v = 0.0;
  for (var e = lid; e < n; e += RW) { ${
      at((i0, i1, i2) => `let x = ld_a(ix_a(${i0}, ${i1}, ${i2}, i3)) - mean; v += x * x;`)
    } }
  let scale = 1.0 / sqrt(reduce_sum(lid, v) / f32(n) + P.eps);
  for (var e = lid; e < n; e += RW) { ${
      at((i0, i1, i2) => `st_d(ix_d(${i0}, ${i1}, ${i2}, i3), (ld_a(ix_a(${i0}, ${i1}, ${i2}, i3)) - mean) * scale);`)
    } }
}`
  })
}

/** @internal: the sum (or mean) of each row */
export const sumRows = (node: Tensor.Tensor, mean: boolean, target: KernelTarget): Kernel =>
  rowwise(
    { op: mean ? "mean" : "sum_rows" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
    "a",
    `
  var s = 0.0;
  for (var i = lid; i < n; i += RW) { s += ld_a(ix_a(i, i1, i2, i3)); }
  s = reduce_sum(lid, s);
  if (lid == 0u) { st_d(ix_d(0u, i1, i2, i3), ${mean ? "s / f32(n)" : "s"}); }`,
    [],
    target
  )

/** @internal: the index of each row's largest element (the first of equals) */
export const argmax = (node: Tensor.Tensor, target: KernelTarget): Kernel =>
  rowwise(
    { op: "argmax" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
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
      let better = ov > red[lid] || (ov == red[lid] && oi < redi[lid]);
      if (oi != 0xffffffffu && (redi[lid] == 0xffffffffu || better)) {
        red[lid] = ov;
        redi[lid] = oi;
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) { st_d(ix_d(i1, 0u, 0u, 0u), i32(redi[0])); }`,
    [],
    target
  )

/**
 * @internal: the running sum along each row: each thread scans a contiguous chunk; chunk totals are
 * scanned in shared memory
 */
export const cumsum = (node: Tensor.Tensor, target: KernelTarget): Kernel =>
  rowwise(
    { op: "cumsum" },
    [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
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
    target
  )

/** @internal: the sum of every element, in one workgroup */
export const sum = (node: Tensor.Tensor): Kernel =>
  KernelSpec.make({
    variant: { family: "sum" },
    operands: [{ name: "a", tensor: node.src[0] }, { name: "d", tensor: node }],
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
  })
