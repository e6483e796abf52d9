/**
 * Matrix-vector products (results of up to 8 columns): threads split K, all columns at once.
 *
 * @internal
 */
import type { Tensor } from "@effect-gpu/core/Tensor"
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, stridesAligned, SUBGROUP_LANES, WG } from "./kernel.js"
import type { Form, Product } from "./product.js"
import { stackRow, stackRows, stackWeights } from "./product.js"

/**
 * elements of a row per thread at least, in the scalar form: 16 keeps a row's threads reading 64
 * contiguous bytes per step (whole memory sectors on GPUs), and lavapipe, where every invocation costs,
 * wants few threads doing more each (benchmarks/RESULTS.md, lavapipe)
 */
const MV_PER_THREAD = 16
/** the same on a software adapter: more elements a thread again (benchmarks/RESULTS.md, lavapipe) */
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

/** @internal: what the vec4 form computes (Product.Form; a stack's stores: halfMatVec, one column) */
export type MatVecForm = Form

/**
 * WGSL: the vec4 accumulation: each thread loads MV_LOADS vec4 of a's row before it multiplies them. A
 * gated form sums the up row into acc[N + j]; a stack's row takes its part's weights (one part a
 * workgroup: the branch is uniform)
 */
const vec4Accumulate = (N: number, form: MatVecForm) => {
  const gated = form.kind === "gated"
  const rowStart = form.kind === "stack"
    ? `  var pt = 0u;
  var a4 = 0u;
${stackRow(form.parts, "m", "pt", "a4", 2)}`
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

/** WGSL: fn <load>_part(pt, i), a stack's weights by part through the bindings' accessor `load` */
const partLoader = (parts: number, load: "ld4" | "ldw") =>
  `fn ${load}_part(pt: u32, i: u32) -> ${load === "ld4" ? "vec4<f32>" : "vec4<u32>"} {
${stackWeights(parts).slice(1).map((n, i) => `  if (pt == ${i + 1}u) { return ${load}_${n}(i); }`).join("\n")}
  return ${load}_a(i);
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
${form.kind === "stack" ? partLoader(form.parts, "ld4") : ""}
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

/** the wide f16 form's subgroups a workgroup, rows a subgroup, and 16-byte chunks a lane loads at once */
const HALF_GROUPS = 8
const HALF_ROWS = 2
const HALF_LOADS = 4
/**
 * workgroups of two rows a subgroup below which a subgroup takes one row: a 1B model's 2048-row products
 * (K 2048 and 8192) gave 128 workgroups of 16 rows, one an H200 multiprocessor
 */
const HALF_FEW = 256

/**
 * @internal: whether the wide f16 form computes a product over `weights`: f16 rows of whole 16-byte chunks
 * (8 values), f32 activations in fours, a few columns, on a device whose subgroups have one size
 */
export const halfApplies = (
  product: Pick<Product, "N" | "K">,
  weights: ReadonlyArray<Tensor>,
  b: Tensor,
  target: KernelTarget
): boolean =>
  target.subgroups === true && target.subgroupSize !== undefined && product.N <= 8 && product.K % 8 === 0 &&
  b.dtype === "f32" && stridesAligned(b, 4) && weights.every((w) => w.dtype === "f16" && stridesAligned(w, 8))

/**
 * @internal: matrix-vector over f16 weights by subgroups (decode of f16 models): each subgroup owns
 * HALF_ROWS rows (one where that gives few workgroups), each lane loads HALF_LOADS 16-byte chunks (8 values) of each row before it multiplies
 * them with b, and the row's sums meet in one subgroup reduction: no workgroup memory and no barrier.
 * It replaced the vec4 form (a workgroup of 256 a row, 8 bytes a load) for f16 (benchmarks/RESULTS.md, choices).
 * Forms as the vec4 one's (a gated pair, a stack of parts); `fallback` runs where an operand's offset does
 * not allow 16-byte bindings.
 */
export const halfMatVec = (product: Product, target: KernelTarget, form: MatVecForm, fallback: Kernel): Kernel => {
  const { K, M, N, batches, bias, epilogue, params } = product
  const W = target.subgroupSize!
  const WGS = HALF_GROUPS * W
  // b made here (one column, a workgroup size a reduction halves, b's row in workgroup memory): each
  // workgroup stages the row it makes, and the products read it there; b is not bound
  const asked = form.made
  const made = asked !== undefined && N === 1 && (WGS & (WGS - 1)) === 0 &&
      4 * K + asked.workgroupBytes(WGS) <= (target.workgroupStorage ?? 16384)
    ? asked
    : undefined
  const operands = made === undefined ? product.operands : product.operands.filter((o) => o.name !== "b")
  const R = Math.ceil(M / (HALF_GROUPS * HALF_ROWS)) * batches < HALF_FEW ? 1 : HALF_ROWS
  const rowsPerGroup = HALF_GROUPS * R
  const groups = Math.ceil(M / rowsPerGroup)
  const gated = form.kind === "gated"
  const C = gated ? 2 * N : N
  // each row's first chunk (16-byte units) and, for a stack, its part
  const rowStarts = form.kind === "stack"
    ? stackRows(form.parts, R, 3, "at", "part")
    : `  var at: array<u32, ${R}>;${gated ? `\n  var atu: array<u32, ${R}>;` : ""}
  for (var r = 0u; r < ${R}u; r++) {
    let m = min(row0 + r, P.d_ne0 - 1u);
    at[r] = ix_a(0u, m, b2 / P.r2, b3 / P.r3) >> 3u;${
      gated ? "\n    atu[r] = ix_u(0u, m, b2 / P.r2, b3 / P.r3) >> 3u;" : ""
    }
  }`
  const load = (r: string, c: string) =>
    form.kind === "stack" ? `ldw_part(part[${r}], at[${r}] + ${c})` : `ldw_a(at[${r}] + ${c})`
  const partLoad = form.kind === "stack" ? partLoader(form.parts, "ldw") : ""
  // a stack's stores (one column): every row's sum through workgroup memory, where the rows' epilogue sees
  // its neighbours' (a key row's pair)
  const stores = form.kind === "stack" && N === 1 ? form.stores : undefined
  const results = stores === undefined
    ? `  for (var r = 0u; r < ${R}u; r++) {
    let m = row0 + r;
    for (var nn = 0u; nn < ${N}u; nn++) {
      let s = subgroupAdd(acc[r * ${C}u + nn]);${
      gated ? `\n      let su = subgroupAdd(acc[r * ${C}u + ${N}u + nn]);` : ""
    }
      var v = ${gated ? "silu_s(s) * su" : "s"};
      ${epilogue}
      if (sgl == 0u && m < P.d_ne0) { st_d(ix_d(m, nn, b2, b3), v); }
    }
  }`
    : `  for (var r = 0u; r < ${R}u; r++) {
    let s = subgroupAdd(acc[r]);
    if (sgl == 0u) { red[grp * ${R}u + r] = s; }
  }
  workgroupBarrier();
  if (lid < ${rowsPerGroup}u) {
    let row = (wid.x + wid.y * nwg.x) * ${rowsPerGroup}u + lid;
    let m = row;
    let nn = 0u;
    var v = red[lid];
    ${epilogue}
    if (row < P.d_ne0) {
      st_d(ix_d(m, nn, b2, b3), v);
      ${stores.code}
    }
  }`
  const kernel = KernelSpec.make({
    variant: {
      family: gated ? "mvh_swiglu" : form.kind === "stack" ? "mvh_stack" : "mvh",
      lanes: W,
      rows: R,
      columns: N,
      bias,
      ...(form.kind === "stack" ? { parts: form.parts } : {}),
      ...made?.variant,
      ...stores?.variant
    },
    enables: ["subgroups"],
    operands: [...operands, ...(stores?.operands ?? []), ...(made?.operands ?? [])],
    params: [...params, ...(stores?.params ?? []), ...(made?.params ?? [])],
    workgroups: [Math.min(groups, target.maxWorkgroups), Math.ceil(groups / target.maxWorkgroups), batches],
    main: `
${SUBGROUP_LANES}
${partLoad}
${stores === undefined ? "" : `var<workgroup> red: array<f32, ${rowsPerGroup}>;\n${stores.decls}`}
${made === undefined ? "" : `${made.decls(WGS)}\nvar<workgroup> bs: array<vec4<f32>, ${K / 4}>;`}
/** the 8 values of a 16-byte chunk against b's 8 at vec4 index k4 */
fn dot8(w: vec4<u32>, b4: u32) -> f32 {
  let lo = vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
  let hi = vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w));
  return ${
      made === undefined ? "dot(lo, ld4_b(b4)) + dot(hi, ld4_b(b4 + 1u))" : "dot(lo, bs[b4]) + dot(hi, bs[b4 + 1u])"
    };
}
${entry(WGS, true)}
  let grp = lid / ${W}u;
  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;
  let row0 = (wid.x + wid.y * nwg.x) * ${rowsPerGroup}u + grp * ${R}u;
  // rows past the end read row M - 1 again and are not written
${rowStarts}
${
      made === undefined
        ? `  var bcol: array<u32, ${N}>;
  for (var j = 0u; j < ${N}u; j++) { bcol[j] = ix_b(0u, j, b2, b3) >> 2u; }`
        : `${made.prologue(WGS, W)}
  for (var k = 4u * lid; k < ${K}u; k += ${4 * WGS}u) { bs[k / 4u] = ${made.fourAt("k")}; }
  workgroupBarrier();
  let bcol = array<u32, 1>(0u);`
    }
  let chunks = P.a_ne0 / 8u;
  var acc: array<f32, ${R * C}>;
  for (var c0 = sgl; c0 < chunks; c0 += ${HALF_LOADS * W}u) {
    // every row's chunks loaded before any product: ${HALF_LOADS} x ${R}${
      gated ? " x 2" : ""
    } x 16 bytes in flight a lane
    var w: array<vec4<u32>, ${HALF_LOADS * R}>;${gated ? `\n    var wu: array<vec4<u32>, ${HALF_LOADS * R}>;` : ""}
    for (var u = 0u; u < ${HALF_LOADS}u; u++) {
      let c = min(c0 + u * ${W}u, chunks - 1u);
      for (var r = 0u; r < ${R}u; r++) {
        w[u * ${R}u + r] = ${load("r", "c")};${gated ? "\n        wu[u * " + R + "u + r] = ldw_u(atu[r] + c);" : ""}
      }
    }
    for (var u = 0u; u < ${HALF_LOADS}u; u++) {
      let c = c0 + u * ${W}u;
      if (c < chunks) {
        for (var j = 0u; j < ${N}u; j++) {
          for (var r = 0u; r < ${R}u; r++) {
            acc[r * ${C}u + j] += dot8(w[u * ${R}u + r], bcol[j] + 2u * c);${
      gated ? `\n            acc[r * ${C}u + ${N}u + j] += dot8(wu[u * ${R}u + r], bcol[j] + 2u * c);` : ""
    }
          }
        }
      }
    }
  }
${results}
}`
  })
  return {
    ...kernel,
    vec4: true,
    wide: true,
    ...(stores !== undefined ? { scalar: stores.operands.map((o) => o.name) } : {}),
    fallback
  }
}
