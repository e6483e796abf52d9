/**
 * Matrix-vector products (results of up to 8 columns): threads split K, all columns at once.
 *
 * @internal
 */
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, SUBGROUP_LANES, WG } from "./kernel.js"
import type { Product } from "./product.js"

/**
 * elements of a row per thread at least, in the scalar form: 16 keeps a row's threads reading 64
 * contiguous bytes per step (whole memory sectors on GPUs) while lavapipe, where every invocation costs,
 * ran 256-wide products 2.5-3x faster than with 4 (benchmarks/RESULTS.md, lavapipe)
 */
const MV_PER_THREAD = 16
/** the same on a software adapter: 64 ran lavapipe's 256-wide products 1.1-1.9x faster than 16 */
const MV_PER_THREAD_SOFTWARE = 64

/** vec4 loads of a's row each thread issues before using them */
const MV_LOADS = 4

/**
 * the N column sums of each row's `tpr` threads, left in red[j * WG + base], through a shared-memory tree:
 * log2(tpr) barriers
 */
const sharedReduce = (N: number, tpr: number) =>
  `  for (var j = 0u; j < ${N}u; j++) { red[j * ${WG}u + lid] = acc[j]; }
  workgroupBarrier();
  for (var s = ${Math.floor(tpr / 2)}u; s > 0u; s >>= 1u) {
    if (t < s) {
      for (var j = 0u; j < ${N}u; j++) { red[j * ${WG}u + lid] += red[j * ${WG}u + lid + s]; }
    }
    workgroupBarrier();
  }`

/** the same over subgroups: each subgroup sums in registers, one lane per column adds the partials */
const subgroupReduce = (N: number) =>
  `  for (var j = 0u; j < ${N}u; j++) {
    let s = subgroupAdd(acc[j]);
    if (sgl == 0u) { red[j * ${WG}u + lid / sgs] = s; }
  }
  workgroupBarrier();
  if (lid < ${N}u) {
    var total = red[lid * ${WG}u];
    for (var k = 1u; k < ${WG}u / sgs; k++) { total += red[lid * ${WG}u + k]; }
    red[lid * ${WG}u] = total;
  }`

/**
 * @internal: what the vec4 form computes: one product; a gated FFN's two (silu(a b) * (u b), the up weights
 * operand u); or a stack of `parts` products over the same b, their rows one after another (the parts'
 * first rows in params s1..; weights a, a1, ...)
 */
export type MatVecForm =
  | { readonly kind: "plain" }
  | { readonly kind: "gated" }
  | { readonly kind: "stack"; readonly parts: number }

/**
 * WGSL: the vec4 accumulation: each thread loads MV_LOADS vec4 of a's row before it multiplies them. A
 * gated form sums the up row into acc[N + j]; a stack's row takes its part's weights (one part a
 * workgroup: the branch is uniform)
 */
const vec4Accumulate = (N: number, form: MatVecForm) => {
  const gated = form.kind === "gated"
  const names = form.kind === "stack" ? Array.from({ length: form.parts }, (_, i) => (i === 0 ? "a" : `a${i}`)) : []
  const rowStart = form.kind === "stack"
    ? `  var lr = m;
  var pt = 0u;
${names.slice(1).map((_, i) => `  if (m >= P.s${i + 1}) { pt = ${i + 1}u; lr = m - P.s${i + 1}; }`).join("\n")}
  var a4 = 0u;
${names.map((n, i) => `  if (pt == ${i}u) { a4 = ix_${n}(0u, lr, b2 / P.r2, b3 / P.r3) >> 2u; }`).join("\n")}`
    : `  let a4 = ix_a(0u, m, b2 / P.r2, b3 / P.r3) >> 2u;${
      gated ? "\n  let u4 = ix_u(0u, m, b2 / P.r2, b3 / P.r3) >> 2u;" : ""
    }`
  const loadA = form.kind === "stack" ? "ld4_part(pt, a4 + k)" : "ld4_a(a4 + k)"
  return `  let K4 = P.a_ne0 / 4u;
${rowStart}
  var b4: array<u32, ${N}>;
  for (var j = 0u; j < ${N}u; j++) { b4[j] = ix_b(0u, j, b2, b3) >> 2u; }
  for (var k0 = lid; k0 < K4; k0 += ${MV_LOADS * WG}u) {
    // every load of a first: MV_LOADS x 16 bytes in flight per thread (twice for a gated pair)
    var av: array<vec4<f32>, ${MV_LOADS}>;${
    gated ?
      `
    var uv: array<vec4<f32>, ${MV_LOADS}>;` :
      ""
  }
    for (var u = 0u; u < ${MV_LOADS}u; u++) {
      let k = k0 + u * ${WG}u;
      if (k < K4) {
        av[u] = ${loadA};${gated ? "\n        uv[u] = ld4_u(u4 + k);" : ""}
      }
    }
    for (var u = 0u; u < ${MV_LOADS}u; u++) {
      let k = k0 + u * ${WG}u;
      if (k < K4) {
        for (var j = 0u; j < ${N}u; j++) {
          let bj = ld4_b(b4[j] + k);
          acc[j] += dot(av[u], bj);${
    gated ?
      `
          acc[${N}u + j] += dot(uv[u], bj);` :
      ""
  }
        }
      }
    }
  }`
}

/** WGSL: a stack's weights by part, for the vec4 form */
const partLoader = (parts: number) =>
  `fn ld4_part(pt: u32, i: u32) -> vec4<f32> {
${Array.from({ length: parts - 1 }, (_, i) => `  if (pt == ${i + 1}u) { return ld4_a${i + 1}(i); }`).join("\n")}
  return ld4_a(i);
}`

/** WGSL: the scalar accumulation: `tpr` threads per row step through K (quantized rows dequantized) */
const scalarAccumulate = (N: number, tpr: number, quantized: boolean) =>
  `  let K = P.a_ne0;
  let abase = ix_a(0u, m, b2 / P.r2, b3 / P.r3);
  for (var k = t; k < K; k += ${tpr}u) {
    let av = ${quantized ? "ldq_a(abase, k)" : "ld_a(abase + k * P.a_nb0)"};
    for (var j = 0u; j < ${N}u; j++) {
      acc[j] += av * ld_b(ix_b(k, j, b2, b3));
    }
  }`

/**
 * @internal: matrix-vector: threads split K, all N columns at once. `vec4`: for K-contiguous operands with
 * 4-aligned strides and K >= 1024, one workgroup per result row, each thread loading MV_LOADS vec4 of a's
 * row before it multiplies them with b (several wide loads in flight, to read a's bytes at the speed of a
 * plain read). Scalar form: rows shorter than MV_PER_THREAD x WG
 * share a workgroup, `tpr` threads each (a power of two, at least MV_PER_THREAD elements per thread), so
 * a short row does not leave most of 256 threads with one element or none; it also runs where an
 * operand's offset is not 4-aligned after all.
 */
export const matVec = (
  product: Product,
  target: KernelTarget,
  vec4: boolean,
  form: MatVecForm = { kind: "plain" },
  fallback?: Kernel
): Kernel => {
  const { K, M, N, batches, bias, epilogue, operands, params } = product
  // a gated pair's sums are N more columns of the reduction
  const C = form.kind === "gated" ? 2 * N : N
  const perThread = target.software === true ? MV_PER_THREAD_SOFTWARE : MV_PER_THREAD
  const tpr = vec4 ? WG : Math.min(WG, 2 ** Math.floor(Math.log2(Math.max(1, K / perThread))))
  // a whole-workgroup row reduces over subgroups; rows that share a workgroup through a shared-memory tree
  const subgroups = target.subgroups === true && tpr === WG
  const rows = WG / tpr
  const groups = Math.ceil(M / rows)
  const family = form.kind === "gated" ? "mv_swiglu" : form.kind === "stack" ? "mv_stack" : "mv"
  const kernel = KernelSpec.make({
    variant: {
      family,
      vec4,
      threadsPerRow: tpr,
      columns: N,
      bias,
      subgroups,
      ...(form.kind === "stack" ? { parts: form.parts } : {})
    },
    ...(subgroups ? { enables: ["subgroups"] } : {}),
    operands,
    params,
    workgroups: [Math.min(groups, target.maxWorkgroups), Math.ceil(groups / target.maxWorkgroups), batches],
    main: `
var<workgroup> red: array<f32, ${WG * C}>;
${form.kind === "stack" ? partLoader(form.parts) : ""}
${subgroups ? `${SUBGROUP_LANES}\n${entry(WG, true)}` : entry()}
  // this thread's row (rows past the end compute row M - 1 again: every thread must reach the barriers)
  // and its place t among the row's threads, whose partial sums start at red[j * WG + base]
  let row = (wid.x + wid.y * nwg.x) * ${rows}u + lid / ${tpr}u;
  let m = min(row, P.d_ne0 - 1u);
  let t = lid % ${tpr}u;
  let base = lid - t;
  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;
  var acc: array<f32, ${C}>;
${vec4 ? vec4Accumulate(N, form) : scalarAccumulate(N, tpr, product.quantized)}
${subgroups ? subgroupReduce(C) : sharedReduce(C, tpr)}
  for (var nn = t; nn < ${N}u; nn += ${tpr}u) {
    var v = ${
      form.kind === "gated"
        ? `silu_s(red[nn * ${WG}u + base]) * red[(${N}u + nn) * ${WG}u + base]`
        : `red[nn * ${WG}u + base]`
    };
    ${epilogue}
    if (row < P.d_ne0) { st_d(ix_d(m, nn, b2, b3), v); }
  }
}`
  })
  if (!vec4) return kernel
  return { ...kernel, vec4: true, fallback: fallback ?? matVec(product, target, false) }
}
