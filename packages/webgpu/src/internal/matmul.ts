/**
 * mul_mat kernels, chosen by shape and by what the device offers: matrix-vector for a few columns, a
 * subgroup-matrix (tensor core) kernel for f16 where the adapter has 16x16x16 f16->f32 fragments, and a
 * shared-memory tiled kernel everywhere else. ggml's layout: a is [K, M], b is [K, N], the result
 * [M, N]; result row n is a's rows dotted with b's row n.
 *
 * @internal
 */
import type { Tensor } from "@effect-gpu/core/Tensor"
import type { Caps, Kernel, MatrixTile, Operand, RegisterTile } from "./kernel.js"
import { bcast, ENTRY, stridesAligned, SUBGROUP_ENTRY, SUBGROUP_LANES, u32, WG } from "./kernel.js"

/** what every mul_mat kernel shares: operands, the bias epilogue, sizes and the batch broadcast */
interface Shape {
  readonly operands: ReadonlyArray<Operand>
  readonly bias: boolean
  /** adds the bias at (m, nn, b2, b3) to `v` */
  readonly epilogue: string
  readonly M: number
  readonly N: number
  readonly K: number
  readonly batches: number
  readonly params: ReadonlyArray<ReturnType<typeof u32>>
}

/**
 * Whether M, N and K are multiples of a workgroup's block (bm x bn, K steps of bk): then every load is in
 * range and the tiled kernels load without bounds checks; part of their key as `whole` or `edges`
 */
const wholeBlocks = ({ K, M, N }: Shape, bm: number, bn: number, bk: number) =>
  M % bm === 0 && N % bn === 0 && K % bk === 0
const blocksKey = (whole: boolean) => (whole ? "whole" : "edges")

/** @internal */
export const mulMat = (node: Tensor, caps: Caps, bias: Tensor | undefined): Kernel => {
  const [a, b] = node.src
  const operands: Array<Operand> = [{ name: "a", tensor: a }, { name: "b", tensor: b }, { name: "d", tensor: node }]
  if (bias) operands.push({ name: "c", tensor: bias })
  const shape: Shape = {
    operands,
    bias: bias !== undefined,
    epilogue: bias ? `v += ld_c(${bcast("c", "m", "nn", "b2", "b3")});` : "",
    M: node.ne[0],
    N: node.ne[1],
    K: a.ne[0],
    batches: node.ne[2] * node.ne[3],
    // b's batches broadcast over a's (ggml: b.ne[2] is a multiple of a.ne[2])
    params: [u32("r2", b.ne[2] / a.ne[2]), u32("r3", b.ne[3] / a.ne[3])]
  }
  if (shape.N <= 8) {
    // vec4 loads pay once every thread has a vec4 of K to load (on lavapipe, K = 256 ran 6% slower)
    return matVec(shape, caps, fourAligned(shape, a, b) && shape.K >= 4 * WG)
  }
  const matrixTile = caps.matrixTile ??
    MATRIX_TILES.find((t) =>
      sharedBytes(t) <= (caps.workgroupStorage ?? 16384) && invocations(t) <= (caps.workgroupInvocations ?? 256)
    )
  if (
    caps.subgroupMatrix === true && matrixTile !== undefined && a.dtype === "f16" && b.dtype === "f16" &&
    a.nb[0] === 2 && b.nb[0] === 2
  ) {
    return subgroupMatrix(shape, a, b, matrixTile)
  }
  return fourAligned(shape, a, b)
    ? registerTiled(shape, caps.registerTile ?? registersFor(shape, caps.software === true))
    : tiled(shape)
}

/** `by` K at a time: K contiguous in both operands, K and every row and batch stride a multiple of `by` */
const aligned = (by: number) => (shape: Shape, a: Tensor, b: Tensor): boolean =>
  shape.K % by === 0 && stridesAligned(a, by) && stridesAligned(b, by)
const fourAligned = aligned(4)
/** eight K at a time (16-byte loads of f16) */
const eightAligned = aligned(8)

/**
 * The register tile by how many workgroups it gives: 8x8 per thread (128x128 per workgroup) once there
 * are enough of those to fill the device twice, smaller tiles for smaller products (measured on the H200
 * with whole blocks loaded unchecked, run ai: 8x8 with K steps of 8 is fastest from 2048^2 results up,
 * 39.0 TFLOP/s against 35.4 for 4x8; 4x8 at 1024^2, 27.1 against 25.1 for 4x4 and 17.5 for 8x8). On a
 * software adapter the biggest tile wherever the result has 128 rows and columns, 8x4 elsewhere: its few
 * cores need few workgroups, and fewer invocations doing more each ran 128^3-256^3 products 1.8-2.5x
 * faster on lavapipe, and the quick transformer block (results of 32 columns) in 21 ms instead of 31.
 */
const registersFor = ({ M, N, batches }: Shape, software: boolean): RegisterTile => {
  const groups = (bm: number, bn: number) => Math.ceil(M / bm) * Math.ceil(N / bn) * batches
  if (groups(128, 128) >= 256 || (software && M >= 128 && N >= 128)) return { m: 8, n: 8, depth: 8 }
  if (software) return { m: 8, n: 4, depth: 16 }
  if (groups(64, 128) >= 128) return { m: 4, n: 8, depth: 16 }
  return { m: 4, n: 4, depth: 16 }
}

/** WGSL: the batch (b2, b3), the first result row and column (m0, n0) of a block, and M, N, K */
const origin = (rows: number, cols: number) =>
  `  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;
  let m0 = wid.x * ${rows}u;
  let n0 = wid.y * ${cols}u;
  let M = P.d_ne0;
  let N = P.d_ne1;
  let K = P.a_ne0;`

/**
 * matrix-vector: threads split K, all N columns at once. `vec4`: for K-contiguous operands with 4-aligned
 * strides (`fourAligned`) and K >= 1024, one workgroup per result row, each thread loading MV_LOADS vec4 of
 * a's row before it multiplies them with b (several wide loads in flight; on the H200 it reads a 4096-wide
 * product at the speed of a plain read of its bytes, `bench/mv-variants.ts`). Scalar form: rows shorter
 * than MV_PER_THREAD x WG share a workgroup, `tpr` threads each (a power of two, at least MV_PER_THREAD
 * elements per thread), so a short row does not leave most of 256 threads with one element or none; it
 * also runs where an operand's offset is not 4-aligned after all.
 */
const matVec = (shape: Shape, caps: Caps, vec4: boolean): Kernel => {
  const { K, M, N, batches, bias, epilogue, operands, params } = shape
  const perThread = caps.software === true ? MV_PER_THREAD_SOFTWARE : MV_PER_THREAD
  const tpr = vec4 ? WG : Math.min(WG, 2 ** Math.floor(Math.log2(Math.max(1, K / perThread))))
  // a whole-workgroup row reduces over subgroups; rows that share a workgroup through a shared-memory tree
  const sg = caps.subgroups === true && tpr === WG
  const rows = WG / tpr
  const accumulate = vec4
    ? `  let K4 = P.a_ne0 / 4u;
  let a4 = ix_a(0u, m, b2 / P.r2, b3 / P.r3) >> 2u;
  var b4: array<u32, ${N}>;
  for (var j = 0u; j < ${N}u; j++) { b4[j] = ix_b(0u, j, b2, b3) >> 2u; }
  for (var k0 = lid; k0 < K4; k0 += ${MV_LOADS * WG}u) {
    // every load of a first: MV_LOADS x 16 bytes in flight per thread
    var av: array<vec4<f32>, ${MV_LOADS}>;
    for (var u = 0u; u < ${MV_LOADS}u; u++) {
      let k = k0 + u * ${WG}u;
      if (k < K4) { av[u] = ld4_a(a4 + k); }
    }
    for (var u = 0u; u < ${MV_LOADS}u; u++) {
      let k = k0 + u * ${WG}u;
      if (k < K4) {
        for (var j = 0u; j < ${N}u; j++) { acc[j] += dot(av[u], ld4_b(b4[j] + k)); }
      }
    }
  }`
    : `  let K = P.a_ne0;
  let abase = ix_a(0u, m, b2 / P.r2, b3 / P.r3);
  for (var k = t; k < K; k += ${tpr}u) {
    let av = ld_a(abase + k * P.a_nb0);
    for (var j = 0u; j < ${N}u; j++) {
      acc[j] += av * ld_b(ix_b(k, j, b2, b3));
    }
  }`
  const groups = Math.ceil(M / rows)
  return {
    // "mv4" (vec4) and "mvs<threads per row>" (scalar) never coincide: the key names the pipeline
    key: `${vec4 ? "mv4" : `mvs${tpr}`}:${N}:${bias ? "bias" : ""}:${sg ? "sg" : ""}`,
    ...(vec4 ? { vec4: true, scalar: matVec(shape, caps, false) } : {}),
    ...(sg ? { enables: ["subgroups"] } : {}),
    operands,
    params,
    workgroups: [Math.min(groups, caps.maxWorkgroups), Math.ceil(groups / caps.maxWorkgroups), batches],
    main: `
var<workgroup> red: array<f32, ${WG * N}>;
${sg ? `${SUBGROUP_LANES}\n${SUBGROUP_ENTRY}` : ENTRY}
  // this thread's row (rows past the end compute row M - 1 again: every thread must reach the barriers)
  // and its place t among the row's threads, whose partial sums start at red[j * WG + base]
  let row = (wid.x + wid.y * nwg.x) * ${rows}u + lid / ${tpr}u;
  let m = min(row, P.d_ne0 - 1u);
  let t = lid % ${tpr}u;
  let base = lid - t;
  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;
  var acc: array<f32, ${N}>;
${accumulate}
${sg ? MV_SUBGROUP_REDUCE(N) : MV_SHARED_REDUCE(N, tpr)}
  for (var nn = t; nn < ${N}u; nn += ${tpr}u) {
    var v = red[nn * ${WG}u + base];
    ${epilogue}
    if (row < P.d_ne0) { st_d(ix_d(m, nn, b2, b3), v); }
  }
}`
  }
}

/**
 * elements of a row per thread at least, in the scalar form: 16 keeps a row's threads reading 64
 * contiguous bytes per step (whole memory sectors on GPUs) while lavapipe, where every invocation costs,
 * ran 256-wide products 2.5-3x faster than with 4 (`pnpm bench --quick --cases matmul,decode_chain`)
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
const MV_SHARED_REDUCE = (N: number, tpr: number) =>
  `  for (var j = 0u; j < ${N}u; j++) { red[j * ${WG}u + lid] = acc[j]; }
  workgroupBarrier();
  for (var s = ${Math.floor(tpr / 2)}u; s > 0u; s >>= 1u) {
    if (t < s) {
      for (var j = 0u; j < ${N}u; j++) { red[j * ${WG}u + lid] += red[j * ${WG}u + lid + s]; }
    }
    workgroupBarrier();
  }`

/** the same over subgroups: each subgroup sums in registers, one lane per column adds the partials */
const MV_SUBGROUP_REDUCE = (N: number) =>
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

/** tiled: a 64x64 block of the result per workgroup, 4x4 per thread, K in steps of 16 through shared memory */
const tiled = ({ M, N, batches, bias, epilogue, operands, params }: Shape): Kernel => {
  const BM = 64
  const BN = 64
  const BK = 16
  return {
    key: `mm:${bias ? "bias" : ""}`,
    operands,
    params,
    workgroups: [Math.ceil(M / BM), Math.ceil(N / BN), batches],
    main: `
var<workgroup> As: array<array<f32, ${BM}>, ${BK}>;
var<workgroup> Bs: array<array<f32, ${BN}>, ${BK}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;
  let a2 = b2 / P.r2;
  let a3 = b3 / P.r3;
  let m0 = wid.x * ${BM}u;
  let n0 = wid.y * ${BN}u;
  let K = P.a_ne0;
${[0, 1, 2, 3].map((i) => `  var r${i} = vec4<f32>(0.0);`).join("\n")}
  for (var k0 = 0u; k0 < K; k0 += ${BK}u) {
    // each of 256 threads loads 4 elements of each tile
    for (var e = 0u; e < 4u; e++) {
      let flat = lid + e * 256u;
      let kk = flat % ${BK}u;
      let rr = flat / ${BK}u;
      let k = k0 + kk;
      let m = m0 + rr;
      let nn = n0 + rr;
      var av = 0.0;
      var bv = 0.0;
      if (k < K && m < P.a_ne1) { av = ld_a(ix_a(k, m, a2, a3)); }
      if (k < K && nn < P.b_ne1) { bv = ld_b(ix_b(k, nn, b2, b3)); }
      As[kk][rr] = av;
      Bs[kk][rr] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < ${BK}u; kk++) {
      let br = vec4<f32>(Bs[kk][lid3.y], Bs[kk][lid3.y + 16u], Bs[kk][lid3.y + 32u], Bs[kk][lid3.y + 48u]);
${[0, 1, 2, 3].map((i) => `      r${i} = fma(vec4<f32>(As[kk][lid3.x + ${i * 16}u]), br, r${i});`).join("\n")}
    }
    workgroupBarrier();
  }
${
      [0, 1, 2, 3].flatMap((i) =>
        [0, 1, 2, 3].map((j) =>
          `  { let m = m0 + lid3.x + ${i * 16}u; let nn = n0 + lid3.y + ${
            j * 16
          }u; if (m < P.d_ne0 && nn < P.d_ne1) { var v = r${i}[${j}]; ${epilogue} st_d(ix_d(m, nn, b2, b3), v); } }`
        )
      ).join("\n")
    }
}`
  }
}

/** elements between rows of a shared-memory tile: the depth plus 8 f16 of padding against bank conflicts */
const pad = (depth: number) => depth + 8

/** invocations of a tiling's workgroup: one subgroup of 32 per 16x16-fragment block */
const invocations = (t: MatrixTile) => 32 * t.sgRows * t.sgCols

/** workgroup memory of a tiling: both staged tiles (f16) and one f32 fragment per subgroup */
const sharedBytes = (t: MatrixTile) =>
  2 * pad(t.depth) * 16 * (t.sgRows * t.fragRows + t.sgCols * t.fragCols) + 4 * 256 * t.sgRows * t.sgCols

/**
 * Tilings in order of preference, the first that fits the device's workgroup memory and invocations
 * wins. 128 x 128 results per workgroup from 4 subgroups (128 invocations) as 2x2 with 4x4 fragments of
 * 16x16 each, K in steps of 32 (24 KiB: several workgroups fit an SM); then, for devices with 16 KiB of
 * workgroup memory, one subgroup of 4x4 fragments, K in steps of 16 (7 KiB). On the H200
 * (`bench/tile-probe.ts`, runs at-au in RESULTS.md), GPU time at 2048^3 / 4096^3 / 8192^3: 2x2:4x4:32 at
 * 201-204 / 239-242 / 263 TFLOP/s, against 187 / 225 / 237 for the 512-invocation 8x2:2x4:32 chosen in
 * runs w-y, when global loads were 8 bytes; 2x4:4x4:32 and 4x2:4x4:32 230-233 / 252-256; K steps of 48
 * or 64 slower (159-210 at 4096^3), and so were 64 x 128 blocks (66-105).
 */
const MATRIX_TILES: ReadonlyArray<MatrixTile> = [
  { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 4, depth: 32 },
  { sgRows: 1, sgCols: 1, fragRows: 4, fragCols: 4, depth: 16 }
]

const range = (n: number) => Array.from({ length: n }, (_, i) => i)

/**
 * f16 mul_mat on subgroup matrices (tensor cores). A workgroup computes a (rows x cols) block of the
 * result: per K step it stages b's rows ("X", the left fragments) and a's rows ("W", read column-major
 * as the right fragments) in shared memory, prefetching the next step into registers while the
 * fragments multiply. The result leaves through shared memory one fragment at a time, so edges, the
 * bias and any result layout are handled by plain stores. Global loads take 16 bytes (eight f16) where K,
 * the strides and offsets are multiples of 8, else 8 bytes where they are multiples of 4, else one f16.
 */
const subgroupMatrix = (shape: Shape, a: Tensor, b: Tensor, tile: MatrixTile): Kernel => {
  // w: f16 per global load, 8 (wide: a vec4<u32> of 16 bytes), 4 (a vec4<f16>) or 1
  const kernel = (w: 1 | 4 | 8): Kernel => {
    const vec = w > 1
    const { depth: TK, fragCols: FC, fragRows: FR, sgCols: SC, sgRows: SR } = tile
    const threads = invocations(tile)
    const TN = SR * FR * 16
    const TM = SC * FC * 16
    const LS = pad(TK)
    // loads per thread per K step, of one tile of `rows` rows
    const loads = (rows: number) => Math.ceil((rows * TK) / w / threads)
    const guard = (rows: number) => (rows * TK) / w % threads !== 0
    // whole blocks (M, N and K multiples of the tile) load without bounds checks: 224.9 / 236.1 against
    // 216.6 / 227.8 TFLOP/s at 4096^3 / 8192^3 on the H200 (run ah in RESULTS.md)
    const whole = wholeBlocks(shape, TM, TN, TK)
    const load = (t: "x" | "w", rows: number) => {
      const [op, base, ld, r0, lim] = t === "x"
        ? ["b", "xb", "P.b_nb1", "n0", "N"]
        : ["a", "wb", "P.a_nb1", "m0", "M"]
      return range(loads(rows)).map((e) => {
        const at = `${base} + r * ${ld} + k`
        const [value, zero] = w === 8
          ? [`ldw_${op}((${at}) >> 3u)`, "vec4<u32>()"]
          : vec
          ? [`ldh4_${op}((${at}) >> 2u)`, "vec4<f16>()"]
          : [`f16(ld_${op}(${at}))`, "0.0h"]
        const body = whole
          ? `${t}r[${e}] = ${value};`
          : `if (r < ${lim} && k < K) { ${t}r[${e}] = ${value}; } else { ${t}r[${e}] = ${zero}; }`
        const idx = `${e * threads}u + lid`
        const open = guard(rows) ? `if (${idx} < ${(rows * TK) / w}u) ` : ""
        return `    ${open}{ let i = ${idx}; let r = ${r0} + i / ${TK / w}u; let k = k0 + (i % ${
          TK / w
        }u) * ${w}u; ${body} }`
      }).join("\n")
    }
    // vec: shared tiles are vec4<f16> arrays, so a staged vec4 is one 8-byte store; subgroup-matrix
    // offsets and strides then count vec4s (Dawn's row_major/col_major spelling accepts vector arrays)
    const sw = vec ? 4 : 1
    const stash = (t: "x" | "w", rows: number) =>
      range(loads(rows)).map((e) => {
        const idx = `${e * threads}u + lid`
        const open = guard(rows) ? `if (${idx} < ${(rows * TK) / w}u) ` : ""
        const S = `${t.toUpperCase()}s`
        const r = `${t}r[${e}]`
        // wide: a load is two staged vec4<f16>
        const at = `(i / ${TK / w}u) * ${LS / sw}u + i % ${TK / w}u${w === 8 ? " * 2u" : ""}`
        const store = w === 8
          ? `let o = ${at}; ${S}[o] = bitcast<vec4<f16>>(${r}.xy); ${S}[o + 1u] = bitcast<vec4<f16>>(${r}.zw);`
          : `${S}[${at}] = ${r};`
        return `    ${open}{ let i = ${idx}; ${store} }`
      }).join("\n")
    const frag = (i: number, j: number) => `c${i}_${j}`
    const steps = range(TK / 16).map((s) =>
      [
        ...range(FR).map((i) =>
          `    let x${i} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&Xs, (sr * ${FR * 16}u + ${
            i * 16
          }u) * ${LS / sw}u + ${(s * 16) / sw}u, ${LS / sw}u);`
        ),
        ...range(FC).map((j) =>
          `    let w${j} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>, col_major>(&Ws, (sc * ${FC * 16}u + ${
            j * 16
          }u) * ${LS / sw}u + ${(s * 16) / sw}u, ${LS / sw}u);`
        ),
        ...range(FR).flatMap((i) =>
          range(FC).map((j) => `    ${frag(i, j)} = subgroupMatrixMultiplyAccumulate(x${i}, w${j}, ${frag(i, j)});`)
        )
      ].join("\n")
    ).map((code) => `    {\n${code}\n    }`).join("\n")
    const store = range(FR).flatMap((i) =>
      range(FC).map((j) =>
        `  subgroupMatrixStore<row_major>(&Cs, sg * 256u, ${frag(i, j)}, 16u);
  workgroupBarrier();
  for (var e = 0u; e < 8u; e++) {
    let i = lane + e * 32u;
    let nn = n0 + sr * ${FR * 16}u + ${i * 16}u + i / 16u;
    let m = m0 + sc * ${FC * 16}u + ${j * 16}u + i % 16u;
    if (nn < N && m < M) { var v = Cs[sg * 256u + i]; ${shape.epilogue} st_d(ix_d(m, nn, b2, b3), v); }
  }
  workgroupBarrier();`
      )
    ).join("\n")
    const vt = vec ? "vec4<f16>" : "f16"
    const rt = w === 8 ? "vec4<u32>" : vt
    return {
      key: `mmsg:${SR}x${SC}:${FR}x${FC}:${TK}:${w === 8 ? "w" : vec ? "v" : "s"}:${shape.bias ? "bias" : ""}:${
        blocksKey(whole)
      }`,
      ...(w === 8 ? { vec4: true, wide: true, scalar: kernel(4) } : vec ? { vec4: true, scalar: kernel(1) } : {}),
      enables: ["f16", "subgroups", "chromium_experimental_subgroup_matrix"],
      // Tint wants subgroup-matrix arguments provably uniform; per-subgroup offsets (lid / 32) are uniform
      // within each subgroup, but not provably so: the case this diagnostic exists to waive
      diagnosticsOff: ["chromium.subgroup_matrix_uniformity"],
      operands: shape.operands,
      params: shape.params,
      workgroups: [Math.ceil(shape.M / TM), Math.ceil(shape.N / TN), shape.batches],
      main: `
var<workgroup> Xs: array<${vt}, ${(TN * LS) / sw}>;
var<workgroup> Ws: array<${vt}, ${(TM * LS) / sw}>;
var<workgroup> Cs: array<f32, ${SR * SC * 256}>;
@compute @workgroup_size(${threads})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  // subgroups of 32 (the kernel is chosen only where the size is fixed at 32), laid out along lid
  let sg = lid / 32u;
  let lane = lid % 32u;
  let sr = sg / ${SC}u;
  let sc = sg % ${SC}u;
${origin(TM, TN)}
  let xb = ix_b(0u, 0u, b2, b3);
  let wb = ix_a(0u, 0u, b2 / P.r2, b3 / P.r3);
  var xr: array<${rt}, ${loads(TN)}>;
  var wr: array<${rt}, ${loads(TM)}>;
${
        range(FR).flatMap((i) => range(FC).map((j) => `  var ${frag(i, j)}: subgroup_matrix_result<f32, 16, 16>;`))
          .join("\n")
      }
  {
    let k0 = 0u;
${load("x", TN)}
${load("w", TM)}
  }
  for (var k0 = 0u; k0 < K; k0 += ${TK}u) {
${stash("x", TN)}
${stash("w", TM)}
    workgroupBarrier();
    if (k0 + ${TK}u < K) {
      let k0 = k0 + ${TK}u;
${load("x", TN)}
${load("w", TM)}
    }
${steps}
    workgroupBarrier();
  }
${store}
}`
    }
  }
  // wide operands have no single-element loads, which the bias epilogue uses: an f16 bias keeps 8 bytes
  const f16Bias = shape.operands.some((o) => o.name === "c" && o.tensor.dtype === "f16")
  return kernel(eightAligned(shape, a, b) && !f16Bias ? 8 : fourAligned(shape, a, b) ? 4 : 1)
}

/**
 * mul_mat where K, the strides and the offsets are multiples of 4: operands load four K at a time (vec4
 * bindings), the next K step is prefetched into registers while this one multiplies, and shared memory
 * holds m and n in fours so each thread's (m x n) block is built from vec4 reads: per K, m/4 + n/4 reads
 * feed m*n fused multiply-adds. The result and the bias go through single-element accessors. Operands
 * that are not 4-aligned after all (their offsets) run the scalar tiled kernel.
 */
const registerTiled = (shape: Shape, tile: RegisterTile): Kernel => {
  const { depth: BK, m: TM, n: TN } = tile
  const BM = 16 * TM
  const BN = 16 * TN
  const [m4, n4] = [TM / 4, TN / 4]
  // vec4 loads of one tile per thread per K step
  const loads = (rows: number) => (rows * BK) / 4 / 256
  // the prefetch registers are plain variables, not an array: 41.3 against 28.8 TFLOP/s at 4096^3 on the
  // H200 with unchecked loads, 35.3 against 32.0 with the select below (runs ae, ah in RESULTS.md)
  const reg = (t: "a" | "b", e: number) => `${t}r${e}`
  // Whole blocks (M, N and K multiples of the tile) load without bounds checks: 41.3 against 35.3
  // TFLOP/s at 4096^3 on the H200 (run ah). Elsewhere a load out of range reads a clamped address and
  // keeps zero, a select rather than a branch (35.3 against 31.5 for the branch, same run)
  const whole = wholeBlocks(shape, BM, BN, BK)
  const load = (t: "a" | "b", rows: number, r0: string, lim: string) =>
    range(loads(rows)).map((e) => {
      const at = `(${t}b + r * P.${t}_nb1 + k) >> 2u`
      const last = `(${t}b + (${lim} - 1u) * P.${t}_nb1 + K - 4u) >> 2u`
      const value = whole
        ? `ld4_${t}(${at})`
        : `select(vec4<f32>(0.0), ld4_${t}(min(${at}, ${last})), r < ${lim} && k < K)`
      return `    { let i = ${e * 256}u + lid; let r = ${r0} + i / ${BK / 4}u; let k = k0 + (i % ${BK / 4}u) * 4u; ${
        reg(t, e)
      } = ${value}; }`
    }).join("\n")
  // shared tiles are [k][rows / 4] of vec4, rows padded by one vec4 against bank conflicts on the stores
  const stash = (t: "a" | "b", rows: number) =>
    range(loads(rows)).map((e) => {
      const S = t === "a" ? "As" : "Bs"
      return `    { let i = ${e * 256}u + lid; let r = i / ${BK / 4}u; let k = (i % ${BK / 4}u) * 4u; let v = ${
        reg(t, e)
      }; ${range(4).map((c) => `${S}[k + ${c}u][r / 4u][r % 4u] = v[${c}];`).join(" ")} }`
    }).join("\n")
  const acc = (i: number, j: number) => `c${i}_${j}`
  // threads by subgroup: a subgroup's 32 threads are 8 (m) x 4 (n) adjacent vec4s, a thread's vec4s of m
  // (n) are 8 (4) apart, so a subgroup reads 8 + 4 distinct vec4s per K, not 16 + 2 as a 16 x 16 grid of
  // threads does (+3% at 4096^3 on the H200). The workgroup stays declared 16 x 16: declared as 256 in
  // one dimension, the same kernel ran 10% slower there (runs ac, ad)
  // one K of the register tile: m/4 + n/4 vec4 reads from shared memory, m*n fused multiply-adds
  const step = (k: string) =>
    [
      ...range(m4).map((i) => `      let a${i} = As[${k}][tx + ${i * 8}u];`),
      ...range(n4).map((j) => `      let b${j} = Bs[${k}][ty + ${j * 4}u];`),
      ...range(m4).flatMap((i) =>
        range(TN).map((j) =>
          `      ${acc(i, j)} = fma(a${i}, vec4<f32>(b${Math.floor(j / 4)}[${j % 4}]), ${acc(i, j)});`
        )
      )
    ].join("\n")
  return {
    key: `mm4:${TM}x${TN}:${BK}${tile.unroll === true ? "u" : ""}:${shape.bias ? "bias" : ""}:${blocksKey(whole)}`,
    vec4: true,
    scalar: tiled(shape),
    operands: shape.operands,
    params: shape.params,
    workgroups: [Math.ceil(shape.M / BM), Math.ceil(shape.N / BN), shape.batches],
    main: `
var<workgroup> As: array<array<vec4<f32>, ${BM / 4 + 1}>, ${BK}>;
var<workgroup> Bs: array<array<vec4<f32>, ${BN / 4 + 1}>, ${BK}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
${origin(BM, BN)}
  let ab = ix_a(0u, 0u, b2 / P.r2, b3 / P.r3);
  let bb = ix_b(0u, 0u, b2, b3);
  // subgroups 2 (m) x 4 (n), each 8 x 4 threads
  let tx = (lid / 32u) % 2u * ${8 * m4}u + lid % 8u;
  let ty = (lid / 64u) * ${4 * n4}u + (lid % 32u) / 8u;
${
      [
        ...range(loads(BM)).map((e) => `  var ${reg("a", e)}: vec4<f32>;`),
        ...range(loads(BN)).map((e) => `  var ${reg("b", e)}: vec4<f32>;`)
      ].join("\n")
    }
${range(m4).flatMap((i) => range(TN).map((j) => `  var ${acc(i, j)} = vec4<f32>(0.0);`)).join("\n")}
  {
    let k0 = 0u;
${load("a", BM, "m0", "M")}
${load("b", BN, "n0", "N")}
  }
  for (var k0 = 0u; k0 < K; k0 += ${BK}u) {
${stash("a", BM)}
${stash("b", BN)}
    workgroupBarrier();
    if (k0 + ${BK}u < K) {
      let k0 = k0 + ${BK}u;
${load("a", BM, "m0", "M")}
${load("b", BN, "n0", "N")}
    }
${
      tile.unroll === true
        ? range(BK).map((k) => `    {\n${step(`${k}u`)}\n    }`).join("\n")
        : `    for (var k = 0u; k < ${BK}u; k++) {\n${step("k")}\n    }`
    }
    workgroupBarrier();
  }
${
      range(m4).flatMap((i) =>
        range(TN).map((j) =>
          `  { let nn = n0 + (ty + ${Math.floor(j / 4) * 4}u) * 4u + ${j % 4}u; let mb = m0 + (tx + ${
            i * 8
          }u) * 4u; if (nn < N) { for (var c = 0u; c < 4u; c++) { let m = mb + c; if (m < M) { var v = ${
            acc(i, j)
          }[c]; ${shape.epilogue} st_d(ix_d(m, nn, b2, b3), v); } } } }`
        )
      ).join("\n")
    }
}`
  }
}
