/**
 * Matrix-vector products over quantized weights (decode: results of up to 8 columns), built to stream
 * the blocks at memory bandwidth. A workgroup is 8 groups of 32 lanes; each group owns RPS rows. K is
 * walked in chunks of 1024: the chunk of b is staged once in workgroup memory (shared by the workgroup's
 * rows), and lane l of a group dequantizes elements 32l..32l+31 of the chunk, one 32-value piece of a
 * block, from whole 32-bit words (coalesced across lanes) into registers and dots them with b. Partial
 * sums meet over subgroups of 32 where the adapter has exactly those, else through workgroup memory.
 * (q4_0 and q8_0 take the int8 form, int8MatVec.ts, where it applies.)
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as DTypes from "@effect-gpu/core/DType"
import type * as Tensor from "@effect-gpu/core/Tensor"
import type { Kernel, KernelTarget } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, repeat, SUBGROUP_LANES } from "./kernel.js"
import type { Product } from "./product.js"

/** elements of K per chunk: 32 lanes x one 32-value piece */
const CHUNK = 1024
/** lanes per group, groups per workgroup */
const LANES = 32
const GROUPS = 8

/**
 * bytes of workgroup memory the kernel takes for `N` columns and `stage` chunks of b staged at once: b's
 * chunks and the reduction's scratch
 */
export const sharedBytes = (N: number, stage = 1): number => stage * N * CHUNK * 4 + LANES * GROUPS * 4 * 2

/**
 * @internal: chunks of b staged at once: as many as the workgroup memory holds, up to K (fewer
 * barriers between the lanes' streams of blocks), at most 8
 */
export const stageFor = (N: number, K: number, storage: number): number => {
  let stage = Math.min(8, Math.ceil(K / CHUNK))
  while (stage > 1 && sharedBytes(N, stage) > storage) stage--
  return stage
}

/**
 * WGSL helpers that read a's blocks by words: wat(o) the 4 bytes at an even byte o (blocks of 18, 22, 34
 * and 210 bytes sit at 2-byte boundaries), spanN(o) N such words from o, and the nibble, byte and bit
 * unpackers, each giving four values as a vec4
 */
const readers = (spans: ReadonlyArray<number>, word: string) => `
fn wat(o: u32) -> u32 {
  let w = o >> 2u;
  let lo = ${word}(w);
  return select(lo, (lo >> 16u) | (${word}(w + 1u) << 16u), (o & 2u) != 0u);
}
${
  spans.map((n) =>
    `fn span${n}(o: u32) -> array<u32, ${n}> {
  let w = o >> 2u;
  let odd = (o & 2u) != 0u;
${range(n + 1).map((k) => `  let r${k} = ${word}(w + ${k}u);`).join("\n")}
  return array<u32, ${n}>(${range(n).map((k) => `select(r${k}, (r${k} >> 16u) | (r${k + 1} << 16u), odd)`).join(", ")});
}`
  ).join("\n")
}
fn nib_lo(q: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(q) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(15u)); }
fn nib_hi(q: u32) -> vec4<f32> { return vec4<f32>((vec4<u32>(q) >> vec4<u32>(4u, 12u, 20u, 28u)) & vec4<u32>(15u)); }
fn sbytes(q: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(q) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}
fn bits(q: u32, j: u32) -> vec4<f32> {
  return vec4<f32>((vec4<u32>(q) >> (vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u));
}
fn half_lo(w: u32) -> f32 { return unpack2x16float(w).x; }
fn half_hi(w: u32) -> f32 { return unpack2x16float(w).y; }`

/**
 * @internal: WGSL (needs f16) decoding 4 quants of a word straight into f16, for kernels that stage f16: a
 * byte or nibble b put in the low mantissa bits of 1024.0h (bits 0x6400) gives 1024 + b exactly, two to a
 * word, so two bitwise ops and a packed subtraction make two values (the f32 path took a conversion, a
 * multiply and a conversion back per value). Exact: the scale's product then rounds once, as f32's did.
 * sbytes_h: 4 signed bytes (biased by 128 first); nibs_h: the low nibbles of 4 bytes, less 8.
 */
export const HALF_QUANTS = `fn sbytes_h(q: u32) -> vec4<f16> {
  let u = q ^ 0x80808080u;
  let e = bitcast<vec2<f16>>((u & 0x00ff00ffu) | 0x64006400u) - vec2<f16>(1152.0h);
  let o = bitcast<vec2<f16>>(((u >> 8u) & 0x00ff00ffu) | 0x64006400u) - vec2<f16>(1152.0h);
  return vec4<f16>(e.x, o.x, e.y, o.y);
}
fn nibs_h(q: u32) -> vec4<f16> {
  let e = bitcast<vec2<f16>>((q & 0x000f000fu) | 0x64006400u) - vec2<f16>(1032.0h);
  let o = bitcast<vec2<f16>>(((q >> 8u) & 0x000f000fu) | 0x64006400u) - vec2<f16>(1032.0h);
  return vec4<f16>(e.x, o.x, e.y, o.y);
}`

/**
 * WGSL: fn piece(row, p) -> array<vec4<f32>, 8>: values 32p..32p+31 of the row starting at byte `row`,
 * dequantized as ggml's tables say (../shared/reference/ggml-next/README.md)
 */
const pieceOf = (dtype: DType.Quantized): { readonly spans: ReadonlyArray<number>; readonly code: string } => {
  const body = (lines: string) =>
    `fn piece(row: u32, p: u32) -> array<vec4<f32>, 8> {\n  var v: array<vec4<f32>, 8>;\n${lines}\n  return v;\n}`
  switch (dtype) {
    case "q8_0":
      return {
        spans: [8],
        code: body(`  let o = row + p * 34u;
  let d = half_lo(wat(o));
  let q = span8(o + 2u);
${range(8).map((i) => `  v[${i}] = d * sbytes(q[${i}]);`).join("\n")}`)
      }
    case "q4_0":
      return {
        spans: [4],
        code: body(`  let o = row + p * 18u;
  let d = half_lo(wat(o));
  let q = span4(o + 2u);
${
          range(4).map((i) => `  v[${i}] = d * (nib_lo(q[${i}]) - 8.0);\n  v[${i + 4}] = d * (nib_hi(q[${i}]) - 8.0);`)
            .join("\n")
        }`)
      }
    case "q4_1":
      return {
        spans: [4],
        code: body(`  let o = row + p * 20u;
  let dm = wat(o);
  let d = half_lo(dm);
  let m = half_hi(dm);
  let q = span4(o + 4u);
${range(4).map((i) => `  v[${i}] = d * nib_lo(q[${i}]) + m;\n  v[${i + 4}] = d * nib_hi(q[${i}]) + m;`).join("\n")}`)
      }
    case "q5_0":
      return {
        spans: [4],
        code: body(`  let o = row + p * 22u;
  let d = half_lo(wat(o));
  let qh = wat(o + 2u);
  let q = span4(o + 6u);
${
          range(4).map((i) =>
            `  v[${i}] = d * (nib_lo(q[${i}]) + 16.0 * bits(qh, ${4 * i}u) - 16.0);\n` +
            `  v[${i + 4}] = d * (nib_hi(q[${i}]) + 16.0 * bits(qh, ${16 + 4 * i}u) - 16.0);`
          ).join("\n")
        }`)
      }
    case "q4_K":
      // piece s of a block is sub-block s: its 6-bit scale and min, and 32 nibbles of chunk s / 2
      return {
        spans: [8],
        code: body(`  let o = row + (p / 8u) * 144u;
  let s = p % 8u;
  let dd = wat(o);
  var S = array<u32, 3>(wat(o + 4u), wat(o + 8u), wat(o + 12u));
  let x = (S[s / 4u] >> (8u * (s % 4u))) & 0xffu;
  let y = (S[(s + 4u) / 4u] >> (8u * (s % 4u))) & 0xffu;
  let z = (S[(s + 4u) % 8u / 4u] >> (8u * (s % 4u))) & 0xffu;
  // s < 4: scale and min from bytes s and s + 4; s >= 4: from byte s + 4 with the top bits of s - 4 and s
  var sc = x & 63u;
  var mn = y & 63u;
  if (s >= 4u) {
    sc = (y & 15u) | ((z >> 6u) << 4u);
    mn = (y >> 4u) | ((x >> 6u) << 4u);
  }
  let scale = half_lo(dd) * f32(sc);
  let minv = half_hi(dd) * f32(mn);
  let q = span8(o + 16u + 32u * (s / 2u));
  let upper = (s & 1u) == 1u;
${range(8).map((i) => `  v[${i}] = scale * select(nib_lo(q[${i}]), nib_hi(q[${i}]), upper) - minv;`).join("\n")}`)
      }
    case "q6_K":
      // piece s of a block: half n = s / 4 and quarter s % 4 of it; a scale per 16 values
      return {
        spans: [8],
        code: body(`  let o = row + (p / 8u) * 210u;
  let s = p % 8u;
  let n = s / 4u;
  let qq = s % 4u;
  let L = span8(o + 64u * n + 32u * (qq & 1u));
  let H = span8(o + 128u + 32u * n);
  let scw = wat(o + 192u + 8u * n + 2u * qq);
  let d = half_lo(wat(o + 208u));
  let s0 = d * f32(bitcast<i32>(scw << 24u) >> 24u);
  let s1 = d * f32(bitcast<i32>(scw << 16u) >> 24u);
  let hs = vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(2u * qq);
${
          range(8).map((i) =>
            `  v[${i}] = ${i < 4 ? "s0" : "s1"} * (select(nib_lo(L[${i}]), nib_hi(L[${i}]), qq >= 2u) + ` +
            `16.0 * vec4<f32>((vec4<u32>(H[${i}]) >> hs) & vec4<u32>(3u)) - 32.0);`
          ).join("\n")
        }`)
      }
  }
}

/**
 * @internal: WGSL that dequantizes 32-value pieces of a's rows: fn piece(row byte, p) ->
 * array<vec4<f32>, 8>, values 32p..32p+31 (for the tiled kernels that stage a's blocks as f16)
 */
export const pieces = (dtype: DType.Quantized, word = "qwi_a"): string => {
  const { code, spans } = pieceOf(dtype)
  return `${readers(spans, word)}
${code}`
}

/**
 * @internal: the quantized matrix-vector kernel for `product` (a quantized, K a multiple of 32), `rps`
 * rows per group of lanes
 */
export const quantizedMatVec = (
  product: Product,
  dtype: DType.Quantized,
  target: KernelTarget,
  rps = 2,
  stage = 1,
  staged = false
): Kernel => {
  const { M, N, batches, bias, epilogue, operands, params } = product
  const WG = LANES * GROUPS
  const rowsPerGroup = GROUPS * rps
  const groups = Math.ceil(M / rowsPerGroup)
  const subgroups = target.subgroups === true && target.subgroupSize === LANES
  // written out only in the staged form: the in-place form ran faster with its loops left as loops
  // (benchmarks/RESULTS.md, tried and not taken)
  const out = staged && target.software !== true
  // the staged form: a's bytes of the chunk for the workgroup's rows, loaded 16 bytes at a time by all
  // lanes together (whole-word block reads from global memory cost a load per 4 bytes), decoded from there
  const rowWords = (stage * CHUNK / DTypes.blockSize(dtype)) * DTypes.typeSize(dtype) / 4
  const accumulate = repeat(
    rps,
    "r",
    out,
    (r) =>
      `let v = piece(${staged ? `(grp * ${rps}u + ${r}) * ${rowWords * 4}u, s * 32u + lane` : `rowb[${r}], p`});
${
        repeat(N, "n", out, (n) =>
          `var t = 0.0;
${repeat(8, "i", out, (i) => `t += dot(v[${i}], bs[(s * ${N}u + ${n}) * 256u + ${i} * ${LANES}u + lane]);`)}
acc[${r} * ${N}u + ${n}] += t;`)
      }`
  )
  const reduce = subgroups
    ? repeat(rps * N, "j", out, (j) =>
      `let total = subgroupAdd(acc[${j}]);
if (lane == 0u) { red[grp * ${rps * N}u + ${j}] = total; }`)
    : `  for (var j = 0u; j < ${rps * N}u; j++) {
    workgroupBarrier();
    part[lid] = acc[j];
    workgroupBarrier();
    if (lane == 0u) {
      var t = 0.0;
      for (var s = 0u; s < ${LANES}u; s++) { t += part[lid + s]; }
      red[grp * ${rps * N}u + j] = t;
    }
  }`
  return KernelSpec.make({
    variant: { family: staged ? "mvqs" : "mvq", dtype, columns: N, rows: rps, stage, bias, subgroups, out },
    ...(subgroups ? { enables: ["subgroups"] } : {}),
    operands,
    params,
    workgroups: [Math.min(groups, target.maxWorkgroups), Math.ceil(groups / target.maxWorkgroups), batches],
    ...(staged ? { vec4: true, fallback: quantizedMatVec(product, dtype, target, rps, stage) } : {}),
    main: `
${staged ? `var<workgroup> as_: array<u32, ${rowsPerGroup * rowWords}>;\nfn qws(w: u32) -> u32 { return as_[w]; }` : ""}
${pieces(dtype, staged ? "qws" : "qwi_a")}
var<workgroup> bs: array<vec4<f32>, ${stage * N * 256}>;
var<workgroup> part: array<f32, ${WG}>;
var<workgroup> red: array<f32, ${GROUPS * rps * N}>;
${subgroups ? `${SUBGROUP_LANES}\n${entry(WG, true)}` : entry(WG)}
  let lane = lid % ${LANES}u;
  let grp = lid / ${LANES}u;
  let b2 = wid.z % P.d_ne2;
  let b3 = wid.z / P.d_ne2;
  let row0 = (wid.x + wid.y * nwg.x) * ${rowsPerGroup}u;
  let K = P.a_ne0;
  // rows past the end read row M - 1 again: every lane must reach the barriers
  var rowb: array<u32, ${rps}>;
  ${
      repeat(rps, "r", out, (r) =>
        `rowb[${r}] = ix_a(0u, min(row0 + grp * ${rps}u + ${r}, P.d_ne0 - 1u), b2 / P.r2, b3 / P.r3);`)
    }
  var acc: array<f32, ${rps * N}>;
  for (var c = 0u; c < K; c += ${stage * CHUNK}u) {
    workgroupBarrier();
    // b's chunks, vec4 v of a chunk at (v % 8) * 32 + v / 8: lane l reads its piece's vec4 i at i * 32 + l,
    // so the lanes of a group read consecutive vec4 (no bank conflicts)
    for (var s = 0u; s < ${stage}u; s++) {
      let k = c + s * ${CHUNK}u + 4u * lid;
      for (var n = 0u; n < ${N}u; n++) {
        var x = vec4<f32>(0.0);
        if (k < K) {
          x = vec4<f32>(ld_b(ix_b(k, n, b2, b3)), ld_b(ix_b(k + 1u, n, b2, b3)), ld_b(ix_b(k + 2u, n, b2, b3)), ld_b(ix_b(k + 3u, n, b2, b3)));
        }
        bs[(s * ${N}u + n) * 256u + (lid % 8u) * ${LANES}u + lid / 8u] = x;
      }
    }${
      staged
        ? `
    let cb = (c / ${DTypes.blockSize(dtype)}u) * ${DTypes.typeSize(dtype)}u;
    let rowBytes = (K / ${DTypes.blockSize(dtype)}u) * ${DTypes.typeSize(dtype)}u;
    for (var v = lid; v < ${rowsPerGroup * rowWords / 4}u; v += ${WG}u) {
      let slot = v / ${rowWords / 4}u;
      let w4 = v % ${rowWords / 4}u;
      let byte = cb + w4 * 16u;
      var x = vec4<u32>(0u);
      if (byte < rowBytes) {
        x = qv_a((ix_a(0u, min(row0 + slot, P.d_ne0 - 1u), b2 / P.r2, b3 / P.r3) + byte) >> 4u);
      }
      let at = slot * ${rowWords}u + w4 * 4u;
      as_[at] = x.x;
      as_[at + 1u] = x.y;
      as_[at + 2u] = x.z;
      as_[at + 3u] = x.w;
    }`
        : ""
    }
    workgroupBarrier();
    for (var s = 0u; s < ${stage}u; s++) {
      let p = (c + s * ${CHUNK}u) / 32u + lane;
      if (p * 32u < K) {
${accumulate}
      }
    }
  }
${reduce}
  workgroupBarrier();
  // one thread per result of the workgroup: its group's partial, then the bias
  if (lid < ${rowsPerGroup * N}u) {
    let g = lid / ${rps * N}u;
    let j = lid % ${rps * N}u;
    let row = row0 + g * ${rps}u + j / ${N}u;
    let nn = j % ${N}u;
    let m = row;
    var v = red[lid];
    ${epilogue}
    if (row < P.d_ne0) { st_d(ix_d(m, nn, b2, b3), v); }
  }
}`
  })
}

/**
 * @internal: chunks of b for the staged form (a's rows staged in workgroup memory too): the fewest whose
 * bytes of a row are whole 16-byte words, or undefined where a's strides or the workgroup memory do not
 * allow it (`rps` rows per group, `N` columns)
 */
export const stagedChunks = (a: Tensor.Tensor, N: number, rps: number, storage: number): number | undefined => {
  const dtype = a.dtype as DType.Quantized
  if (a.nb.slice(1).some((nb) => nb % 16 !== 0)) return undefined
  const bytes = (stage: number) => (stage * CHUNK / DTypes.blockSize(dtype)) * DTypes.typeSize(dtype)
  const stage = range(4).map((i) => i + 1).find((s) => bytes(s) % 16 === 0)
  if (stage === undefined) return undefined
  return stagedBytes(dtype, N, rps, stage) <= storage ? stage : undefined
}

/** workgroup memory of the staged form: a's staged rows besides b's chunks and the reduction */
const stagedBytes = (dtype: DType.Quantized, N: number, rps: number, stage: number) =>
  sharedBytes(N, stage) + GROUPS * rps * (stage * CHUNK / DTypes.blockSize(dtype)) * DTypes.typeSize(dtype)
