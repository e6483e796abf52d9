/**
 * Tiled matrix products through shared memory: a scalar kernel for any strides, and a register-tiled
 * one for operands that load four K at a time (vec4), with the next K step prefetched into registers.
 *
 * @internal
 */
import type { Kernel, RegisterTile } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { range } from "./kernel.js"
import type { Product } from "./product.js"
import { gatedRow, origin, wholeBlocks } from "./product.js"

/**
 * @internal: a 64x64 block of the result per workgroup, 4x4 per thread, K in steps of 16 through shared
 * memory. `gated` (mul_mat_swiglu; M counts gate's and up's rows): a thread's rows 16 apart pair a gate row
 * with its up row (runs of 16, gatedRow), and it stores silu(gate) * up
 */
export const tiled = (
  { M, N, batches, bias, epilogue, operands, params, quantized }: Product,
  gated = false
): Kernel => {
  const BM = 64
  const BN = 64
  const BK = 16
  // quantized weights dequantize element k of row m as they are staged
  const loadA = quantized ? "ldq_a(ix_a(0u, m, a2, a3), k)" : "ld_a(ix_a(k, m, a2, a3))"
  const rowA = gated
    ? `${gatedRow("m0 + rr", 16, "P.d_ne0", "o", "m")} let inRange = o < P.d_ne0;`
    : "let m = m0 + rr; let inRange = m < P.a_ne1;"
  const accumulate = range(4).map((i) => `      r${i} = fma(vec4<f32>(As[kk][lid3.x + ${i * 16}u]), br, r${i});`)
  const store = gated
    ? range(2).flatMap((p) =>
      range(4).map((j) =>
        [
          `  { let x = m0 + lid3.x + ${p * 32}u; let o = (x / 32u) * 16u + x % 16u; let nn = n0 + lid3.y + ${j * 16}u;`,
          `if (o < P.d_ne0 && nn < P.d_ne1) { st_d(ix_d(o, nn, b2, b3), silu_s(r${2 * p}[${j}]) * r${
            2 * p + 1
          }[${j}]); } }`
        ].join(" ")
      )
    )
    : range(4).flatMap((i) =>
      range(4).map((j) => {
        const [mi, nj] = [i * 16, j * 16]
        return [
          `  { let m = m0 + lid3.x + ${mi}u; let nn = n0 + lid3.y + ${nj}u;`,
          `if (m < P.d_ne0 && nn < P.d_ne1) { var v = r${i}[${j}]; ${epilogue} st_d(ix_d(m, nn, b2, b3), v); } }`
        ].join(" ")
      })
    )
  return KernelSpec.make({
    variant: { family: "mm", bias, ...(gated ? { gated } : {}) },
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
${range(4).map((i) => `  var r${i} = vec4<f32>(0.0);`).join("\n")}
  for (var k0 = 0u; k0 < K; k0 += ${BK}u) {
    // each of 256 threads loads 4 elements of each tile
    for (var e = 0u; e < 4u; e++) {
      let flat = lid + e * 256u;
      let kk = flat % ${BK}u;
      let rr = flat / ${BK}u;
      let k = k0 + kk;
      ${rowA}
      let nn = n0 + rr;
      var av = 0.0;
      var bv = 0.0;
      if (k < K && inRange) { av = ${loadA}; }
      if (k < K && nn < P.b_ne1) { bv = ld_b(ix_b(k, nn, b2, b3)); }
      As[kk][rr] = av;
      Bs[kk][rr] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < ${BK}u; kk++) {
      let br = vec4<f32>(Bs[kk][lid3.y], Bs[kk][lid3.y + 16u], Bs[kk][lid3.y + 32u], Bs[kk][lid3.y + 48u]);
${accumulate.join("\n")}
    }
    workgroupBarrier();
  }
${store.join("\n")}
}`
  })
}

/**
 * @internal: mul_mat where K, the strides and the offsets are multiples of 4: operands load four K at a
 * time (vec4 bindings), the next K step is prefetched into registers while this one multiplies, and
 * shared memory holds m and n in fours so each thread's (m x n) block is built from vec4 reads: per K,
 * m/4 + n/4 reads feed m*n fused multiply-adds. The result and the bias go through single-element
 * accessors. Operands that are not 4-aligned after all (their offsets) run the scalar tiled kernel.
 * `gated` (mul_mat_swiglu; M counts gate's and up's rows; 8 rows a thread): a thread's two vec4s of rows
 * pair gate rows with their up rows (runs of 32, gatedRow), and it stores silu(gate) * up.
 */
export const registerTiled = (product: Product, tile: RegisterTile, gated = false): Kernel => {
  const { depth: BK, m: TM, n: TN } = tile
  if (gated && TM !== 8) throw new Error(`a gated product takes 8 rows a thread, not ${TM}`)
  const BM = 16 * TM
  const BN = 16 * TN
  const [m4, n4] = [TM / 4, TN / 4]
  const columnsFirst = tile.order === "columns"
  const blocks = [Math.ceil(product.M / BM), Math.ceil(product.N / BN)]
  // vec4 loads of one tile per thread per K step
  const loads = (rows: number) => (rows * BK) / 4 / 256
  // the prefetch registers are plain variables, not an array, which the H200 ran faster
  // (benchmarks/RESULTS.md, mul_mat f32 history)
  const reg = (t: "a" | "b", e: number) => `${t}r${e}`
  // Whole blocks (M, N and K multiples of the tile) load without bounds checks. Elsewhere a load out of
  // range reads a clamped address and keeps zero, a select rather than a branch (faster on the H200)
  const whole = wholeBlocks(product, BM, BN, BK)
  const load = (t: "a" | "b", rows: number, r0: string, lim: string) =>
    range(loads(rows)).map((e) => {
      // a gated product's a: its logical row x placed (result row o, weight row r), up's rows past gate's
      const pairs = gated && t === "a"
      const at = `(${t}b + r * P.${t}_nb1 + k) >> 2u`
      const last = `(${t}b + (${pairs ? `2u * ${lim}` : lim} - 1u) * P.${t}_nb1 + K - 4u) >> 2u`
      const value = whole
        ? `ld4_${t}(${at})`
        : `select(vec4<f32>(0.0), ld4_${t}(min(${at}, ${last})), ${pairs ? "o" : "r"} < ${lim} && k < K)`
      const row = pairs ? gatedRow(`${r0} + i / ${BK / 4}u`, 32, lim, "o", "r") : `let r = ${r0} + i / ${BK / 4}u;`
      const place = `${row} let k = k0 + (i % ${BK / 4}u) * 4u;`
      return `    { let i = ${e * 256}u + lid; ${place} ${reg(t, e)} = ${value}; }`
    }).join("\n")
  // shared tiles are [k][rows / 4] of vec4, rows padded by one vec4 against bank conflicts on the stores
  const stash = (t: "a" | "b", rows: number) =>
    range(loads(rows)).map((e) => {
      const S = t === "a" ? "As" : "Bs"
      const place = `let r = i / ${BK / 4}u; let k = (i % ${BK / 4}u) * 4u; let v = ${reg(t, e)};`
      const stores = range(4).map((c) => `${S}[k + ${c}u][r / 4u][r % 4u] = v[${c}];`).join(" ")
      return `    { let i = ${e * 256}u + lid; ${place} ${stores} }`
    }).join("\n")
  const acc = (i: number, j: number) => `c${i}_${j}`
  // threads by subgroup: a subgroup's 32 threads are 8 (m) x 4 (n) adjacent vec4s, a thread's vec4s of m
  // (n) are 8 (4) apart, so a subgroup reads 8 + 4 distinct vec4s per K, not 16 + 2 as a 16 x 16 grid of
  // threads does. The workgroup stays declared 16 x 16: declared as 256 in one dimension, the same kernel
  // ran slower on the H200
  // one K of the register tile: m/4 + n/4 vec4 reads from shared memory, m*n fused multiply-adds
  const step = (k: string) =>
    [
      ...range(m4).map((i) => `      let a${i} = As[${k}][tx + ${i * 8}u];`),
      ...range(n4).map((j) => `      let b${j} = Bs[${k}][ty + ${j * 4}u];`),
      ...range(m4).flatMap((i) =>
        range(TN).map((j) => {
          const b = `b${Math.floor(j / 4)}[${j % 4}]`
          return `      ${acc(i, j)} = fma(a${i}, vec4<f32>(${b}), ${acc(i, j)});`
        })
      )
    ].join("\n")
  const registers = [
    ...range(loads(BM)).map((e) => `  var ${reg("a", e)}: vec4<f32>;`),
    ...range(loads(BN)).map((e) => `  var ${reg("b", e)}: vec4<f32>;`)
  ]
  const accumulators = range(m4).flatMap((i) => range(TN).map((j) => `  var ${acc(i, j)} = vec4<f32>(0.0);`))
  const kLoop = tile.unroll === true
    ? range(BK).map((k) => `    {\n${step(`${k}u`)}\n    }`).join("\n")
    : `    for (var k = 0u; k < ${BK}u; k++) {\n${step("k")}\n    }`
  const store = gated
    ? range(TN).map((j) => {
      const nn = `n0 + (ty + ${Math.floor(j / 4) * 4}u) * 4u + ${j % 4}u`
      const write = `st_d(ix_d(o, nn, b2, b3), silu_s(${acc(0, j)}[c]) * ${acc(1, j)}[c]);`
      return `  { let nn = ${nn}; let mb = m0 + tx * 4u; if (nn < N) { for (var c = 0u; c < 4u; c++) { let x = mb + c; let o = (x / 64u) * 32u + x % 32u; if (o < M) { ${write} } } } }`
    })
    : range(m4).flatMap((i) =>
      range(TN).map((j) => {
        const nn = `n0 + (ty + ${Math.floor(j / 4) * 4}u) * 4u + ${j % 4}u`
        const mb = `m0 + (tx + ${i * 8}u) * 4u`
        const write = `var v = ${acc(i, j)}[c]; ${product.epilogue} st_d(ix_d(m, nn, b2, b3), v);`
        return `  { let nn = ${nn}; let mb = ${mb}; if (nn < N) { for (var c = 0u; c < 4u; c++) { let m = mb + c; if (m < M) { ${write} } } } }`
      })
    )
  return KernelSpec.make({
    variant: {
      family: "mm4",
      m: TM,
      n: TN,
      depth: BK,
      unroll: tile.unroll === true,
      bias: product.bias,
      whole,
      ...(gated ? { gated } : {}),
      ...(columnsFirst ? { order: "columns" } : {})
    },
    vec4: true,
    fallback: tiled(product, gated),
    operands: product.operands,
    params: product.params,
    workgroups: columnsFirst ? [blocks[1], blocks[0], product.batches] : [blocks[0], blocks[1], product.batches],
    main: `
var<workgroup> As: array<array<vec4<f32>, ${BM / 4 + 1}>, ${BK}>;
var<workgroup> Bs: array<array<vec4<f32>, ${BN / 4 + 1}>, ${BK}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
${origin(BM, BN, "wid.z", columnsFirst)}
  let ab = ix_a(0u, 0u, b2 / P.r2, b3 / P.r3);
  let bb = ix_b(0u, 0u, b2, b3);
  // subgroups 2 (m) x 4 (n), each 8 x 4 threads
  let tx = (lid / 32u) % 2u * ${8 * m4}u + lid % 8u;
  let ty = (lid / 64u) * ${4 * n4}u + (lid % 32u) / 8u;
${registers.join("\n")}
${accumulators.join("\n")}
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
${kLoop}
    workgroupBarrier();
  }
${store.join("\n")}
}`
  })
}
