/**
 * Fused attention for prompts on subgroup matrices in one pass over the keys. A workgroup takes 16 query
 * rows of one head per subgroup; blocks of 32 keys go by, K and V staged in workgroup memory 8 f16 a load
 * and shared by the subgroups. Each block's K, V and mask words are loaded a block ahead, in flight under
 * the block before (the mask's, awaited at each block's start, had cost time: benchmarks/RESULTS.md).
 * Per block: S = Q K^T on the fragments, the lanes' scores (two lanes a row) into P = exp(S - m) as f16,
 * then O += P V on the fragments, which stay in registers.
 *
 * Subgroup matrices give no access to a row, so O is rescaled only when a row's max grows by more than
 * RESCALE_AT over the max its P was taken against (P is then at most e^RESCALE_AT, well inside f16): the
 * fragments go through workgroup memory once for that block, which after the first few blocks is rare.
 * The two-pass form (attentionMatrix.ts), which never rescales but computes S twice, is the fallback.
 * Where a mask hides a whole block from every row of a workgroup (a causal prompt's later keys), the block
 * is skipped before its K and V are staged. Staged rows are padded so that lanes and matrix loads fall in
 * distinct banks (S_SPREAD). A short prompt's keys are split over workgroups (splitsFor), each leaving its
 * rows' max, sum and unweighed O for the decode form's merge (attentionMerge.ts), which weighs in the sink.
 * It outruns the two-pass form on GPUs (benchmarks/RESULTS.md, issue 18's history).
 *
 * @internal
 */
import type { Op } from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { LEFT, matrixKernel, multiplyPV, RESULT, RIGHT_COLUMNS, tileEntry } from "./attentionMatrix.js"
import { mergeKernel } from "./attentionMerge.js"
import type { Kernel, KernelTarget, Operand, Param } from "./kernel.js"
import { range, u32 } from "./kernel.js"

/** keys per block: two fragments of S a subgroup, 16 keys a lane */
const KEYS = 32
/** how far (natural log) a row's max may pass the one its P is taken against before O is rescaled */
const RESCALE_AT = 8

/**
 * Rows spread over the banks: S's and P's row strides (f32, f16), K's and V's padding (f16). A lane pair's
 * scores of 16 rows read from 32 f32 a row would fall in one bank for every row (16 lanes a bank), and a
 * matrix load's 16-byte pieces of rows 256 bytes apart (K and V at head size 128) in the same four banks;
 * these strides keep rows 16-byte aligned for the subgroup-matrix loads and stores, and leave two lanes a
 * bank for the scores (each lane taking every other key) and the matrix loads' rows in distinct banks
 */
const S_SPREAD = KEYS + 4
const P_SPREAD = KEYS + 8
const KV_PAD = 8

/** the workgroup memory the kernel takes for head sizes D and Dv and `subgroups` */
const sharedBytes = (D: number, Dv: number, subgroups: number, spread: boolean) =>
  KEYS * (D + Dv + (spread ? 2 * KV_PAD : 0)) * 2 +
  subgroups * 16 * (spread ? S_SPREAD * 4 + P_SPREAD * 2 : KEYS * (4 + 2)) + subgroups * 16 * 4 + 256

/**
 * workgroups of 8 subgroups that fill the GPU, one an SM as their registers allow: few query rows over many
 * keys split the keys until their workgroups reach them (512 queries, 128 workgroups, ran slower in 2
 * splits: benchmarks/RESULTS.md)
 */
const FILL = 128
/** the fewest blocks of keys a split takes: shorter ones would spend more on their merge than they save */
const SPLIT_BLOCKS = 4
/** the most splits of the keys */
const MAX_SPLITS = 16

/**
 * @internal: splits of the keys for a workgroup of `subgroups`: the asked number, else the fewest (a power
 * of two) that bring the workgroups to FILL, each split keeping SPLIT_BLOCKS blocks or more: a workgroup
 * walks its keys block after block, so a few query rows over a long cache leave most of the GPU idle
 */
export const splitsFor = (node: Tensor.Tensor, target: KernelTarget, subgroups: number): number => {
  const asked = target.attentionPrefill?.splits
  if (asked !== undefined) return asked
  const [q, k] = node.src
  const workgroups = Math.ceil(q.ne[1] / (16 * subgroups)) * q.ne[2] * q.ne[3]
  const blocks = Math.ceil(k.ne[1] / KEYS)
  let splits = 1
  while (workgroups * splits < FILL && blocks >= 2 * splits * SPLIT_BLOCKS && splits < MAX_SPLITS) splits *= 2
  return splits
}

/**
 * @internal: subgroups a workgroup of the one-pass form takes: the asked number, else 8 (128 query rows,
 * K and V staged once for more of them: faster on the H200 and the H100, benchmarks/RESULTS.md) where that
 * still gives the GPU a workgroup an SM, or where splitting the keys does, and its tiles fit; else 4
 */
export const subgroupsFor = (node: Tensor.Tensor, target: KernelTarget): number => {
  const asked = target.attentionPrefill?.subgroups
  if (asked !== undefined) return asked
  const [q, , v] = node.src
  const heads = q.ne[2] * q.ne[3]
  const fits = sharedBytes(q.ne[0], v.ne[0], 8, false) <= (target.workgroupStorage ?? 16384)
  return fits && (Math.ceil(q.ne[1] / 128) * heads >= FILL || splitsFor(node, target, 8) > 1) ? 8 : 4
}

/** the partial results of the one-pass form with its keys in `splits`: one per query row, head and split */
const partsOf = (node: Tensor.Tensor, splits: number) =>
  node.src[0].ne[1] * node.src[0].ne[2] * node.src[0].ne[3] * splits

/**
 * @internal: the bytes of scratch after the result that the one-pass form takes where it splits the keys
 * (each split's max, sum and unweighed output row: the decode form's layout, which its merge reads); 0
 * where it does not split
 */
export const scratchBytes = (node: Tensor.Tensor, target: KernelTarget): number => {
  const splits = splitsFor(node, target, subgroupsFor(node, target))
  return splits > 1 ? 4 * partsOf(node, splits) * (node.src[2].ne[0] + 2) : 0
}

/** strides past the first a multiple of 16 bytes, the first one element of f16: rows load 8 f16 at a time */
const loadsEight = (t: Tensor.Tensor) => t.nb[0] === 2 && t.nb.slice(1).every((n) => n % 16 === 0)

/**
 * @internal: whether the one-pass form takes a flash_attn_ext node that the two-pass form takes: K and V
 * rows (and the mask's) load 8 f16 at a time, within the workgroup memory. Its bindings' offsets are
 * checked as they are bound (else the two-pass form runs).
 */
export const applies = (node: Tensor.Tensor, op: Extract<Op, { _tag: "FlashAttnExt" }>, target: KernelTarget) => {
  if (target.attentionPrefill?.form === "two-pass") return false
  const [q, k, v] = node.src
  const mask = op.hasMask ? node.src[3] : undefined
  return loadsEight(k) && loadsEight(v) && (mask === undefined || loadsEight(mask)) &&
    // (the packed rows' memory: the spread ones take more, where it fits)
    sharedBytes(q.ne[0], v.ne[0], subgroupsFor(node, target), false) <= (target.workgroupStorage ?? 16384)
}

/** @internal: the one-pass kernel, `fallback` (the two-pass one) where the bindings do not allow 8-f16 loads */
export const flashAttnTiles = (
  node: Tensor.Tensor,
  op: Extract<Op, { _tag: "FlashAttnExt" }>,
  operands: ReadonlyArray<Operand>,
  params: ReadonlyArray<Param>,
  target: KernelTarget,
  fallback: Kernel
): Kernel => {
  const [q, , v] = node.src
  const D = q.ne[0]
  const Dv = v.ne[0]
  const SG = subgroupsFor(node, target)
  const SPLITS = splitsFor(node, target, SG)
  const split = SPLITS > 1
  const ROWS = 16 * SG
  const THREADS = 32 * SG
  const HALF = KEYS / 2
  const prefetch = target.attentionPrefill?.prefetch !== false
  const spread = target.attentionPrefill?.spread !== false &&
    sharedBytes(D, Dv, SG, true) <= (target.workgroupStorage ?? 16384)
  // S's and P's row strides; with `spread` a lane takes keys hc, hc + 2, ... (every other one), else a run
  // of HALF keys from hc * HALF
  const SS = spread ? S_SPREAD : KEYS
  const PS = spread ? P_SPREAD : KEYS
  // K's and V's staged row strides, in f16
  const KS = D + (spread ? KV_PAD : 0)
  const VS = Dv + (spread ? KV_PAD : 0)
  const keyOf = (c: number) => spread ? `${2 * c}u + hc` : `hc * ${HALF}u + ${c}u`
  const mask = op.hasMask
  const sinks = op.hasSinks
  const softcap = op.logitSoftcap !== 0
  // the subgroup's region of Ss: its S, or fragments of O on their way through workgroup memory; of Ps: P
  const region = `sg * ${16 * SS}u`
  const pRegion = `sg * ${16 * PS}u`
  // O's fragments through the subgroup's region, PER at a time (each 256 floats): `body` runs on each
  // element e (0..255) of fragment f, lane-strided, between the stores and (with `reload`) the loads back
  const PER = (16 * KEYS) / 256
  const rounds = (body: string, reload: boolean) =>
    range(Math.ceil(Dv / 16 / PER)).map((r) => {
      const frags = range(PER).map((f) => r * PER + f).filter((n) => n < Dv / 16)
      return `    workgroupBarrier();
${frags.map((n, f) => `    subgroupMatrixStore<row_major>(&Ss, ${region} + ${f * 256}u, o${n}, 16u);`).join("\n")}
    workgroupBarrier();
    for (var x = sgl; x < ${frags.length * 256}u; x += 32u) {
      let f = x / 256u;
      let e = x % 256u;
      let r = e / 16u;
      let n = ${r * PER}u + f;
${body}
    }${
        reload
          ? `\n    workgroupBarrier();\n${
            frags.map((n, f) =>
              `    o${n} = subgroupMatrixLoad<${RESULT}, row_major>(&Ss, ${region} + ${f * 256}u, 16u);`
            ).join("\n")
          }`
          : ""
      }`
    }).join("\n")
  // K and V 8 f16 a load, each thread's loads of a block held in registers (kr, vr): loaded a block ahead
  // where `prefetch` (so that they are in flight under the block's products), staged as two vec4<f16> each
  const loadsOf = (width: number) => Math.ceil((KEYS * width) / 8 / THREADS)
  const fetch = (regs: string, width: number, op: "k" | "v", b3: string, at: string) =>
    range(loadsOf(width)).map((e) =>
      `    {
      let x = lid + ${e * THREADS}u;
      let j = ${at} + x / ${width / 8}u;
      ${regs}[${e}] = vec4<u32>();
      if (x < ${(KEYS * width) / 8}u && j < nkv) { ${regs}[${e}] = ldw_${op}(ix_${op}((x % ${
        width / 8
      }u) * 8u, j, g, ${b3}) >> 3u); }
    }`
    ).join("\n")
  const stash = (tile: string, regs: string, width: number, stride: number) =>
    range(loadsOf(width)).map((e) =>
      `    {
      let x = lid + ${e * THREADS}u;
      if (x < ${(KEYS * width) / 8}u) {
        let o = (x / ${width / 8}u) * ${stride / 4}u + (x % ${width / 8}u) * 2u;
        ${tile}[o] = bitcast<vec4<f16>>(${regs}[${e}].xy);
        ${tile}[o + 1u] = bitcast<vec4<f16>>(${regs}[${e}].zw);
      }
    }`
    ).join("\n")
  const fetchBoth = (at: string) => `${fetch("kr", D, "k", "kb3", at)}\n${fetch("vr", Dv, "v", "vb3", at)}`
  // the lane's mask values, 8 a load: HALF keys of its row, or with `spread` the row's KEYS keys, of which
  // word c holds keys 2c and 2c + 1 (the lane's c-th key, hc)
  const maskWords = spread ? KEYS / 8 : HALF / 8
  const maskValue = (c: number) =>
    spread
      ? `f32(select(unpack2x16float(mk[${c >> 2}][${c & 3}]).x, unpack2x16float(mk[${c >> 2}][${c & 3}]).y, hc == 1u))`
      : `f32(bitcast<vec4<f16>>(mk[${c >> 3}].${(c & 7) < 4 ? "xy" : "zw"})[${c & 3}])`
  // the lane's mask words of the block from `at` into `regs`, zero past the keys or rows
  const maskFetch = (regs: string, at: string) =>
    range(maskWords).map((u) =>
      `    {
      let jb = ${at} + ${spread ? "" : `hc * ${HALF}u + `}${u * 8}u;
      ${regs}[${u}] = vec4<u32>();
      if (i < nq && jb < nkv) { ${regs}[${u}] = ldw_m(ix_m(jb, i, h % P.m_ne2, b % P.m_ne3) >> 3u); }
    }`
    ).join("\n")
  // whether a row sees a key of the block: where `prefetch`, the mask words came a block ahead (mkn), and
  // the next block's go out before the workgroup waits on this one's flag
  const maskLoads = `${
    prefetch ? `    let mk = mkn;` : `    var mk: array<vec4<u32>, ${maskWords}>;\n${maskFetch("mk", "j0")}`
  }
    var seen = false;
${
    range(maskWords).map((u) =>
      `    seen = seen || (i < nq && j0 + ${spread ? "" : `hc * ${HALF}u + `}${u * 8}u < nkv &&
      (any(bitcast<vec4<f16>>(mk[${u}].xy) >= vec4<f16>(-65504.0h)) ||
        any(bitcast<vec4<f16>>(mk[${u}].zw) >= vec4<f16>(-65504.0h))));`
    ).join("\n")
  }${prefetch ? `\n${maskFetch("mkn", `j0 + ${KEYS}u`)}` : ""}
    if (seen) { flags[1] = 1u; }
    let go = workgroupUniformLoad(&flags[1]);
    if (lid == 0u) { flags[1] = 0u; }
    if (go == 0u) {${prefetch ? `\n${fetchBoth(`j0 + ${KEYS}u`)}` : ""}
      // the flag cleared before any invocation sets it for the next block (on the other path the block's
      // own barriers come between)
      workgroupBarrier();
      continue;
    }`
  const scores = range(HALF).map((c) =>
    `    {
      let jj = ${keyOf(c)};
      var x = Ss[(${region}) + row * ${SS}u + jj] * P.scale;${
      softcap ? "\n      x = P.softcap * tanh_s(x / P.softcap);" : ""
    }
      if (j0 + jj >= nkv) { x = neg_inf(); }${mask ? `\n      else if (i < nq) { x += slope * ${maskValue(c)}; }` : ""}
      sv[${c}] = x;
      bm = max(bm, x);
    }`
  ).join("\n")
  const loop = `
  for (var j0 = j_first; j0 < j_end; j0 += ${KEYS}u) {
${mask ? maskLoads : "    workgroupBarrier();"}
${prefetch ? "" : fetchBoth("j0")}
${stash("Ks", "kr", D, KS)}
${stash("Vs", "vr", Dv, VS)}
    workgroupBarrier();
${prefetch ? fetchBoth(`j0 + ${KEYS}u`) : ""}
${
    range(KEYS / 16).map((t) =>
      `    {
      var s = zero;
${
        range(D / 16).map((s) =>
          `      s = subgroupMatrixMultiplyAccumulate(q${s}, subgroupMatrixLoad<${RIGHT_COLUMNS}>(&Ks, ${
            (t * 16 * KS + s * 16) / 4
          }u, ${KS / 4}u), s);`
        ).join("\n")
      }
      subgroupMatrixStore<row_major>(&Ss, ${region} + ${t * 16}u, s, ${SS}u);
    }`
    ).join("\n")
  }
    workgroupBarrier();
    var sv: array<f32, ${HALF}>;
    var bm = neg_inf();
${scores}
    bm = max(bm, subgroupShuffleXor(bm, 1u));
    // m's rows move together: a subgroup rescales when any of its rows passes its max by RESCALE_AT
    let grows = subgroupAny(bm > m + ${RESCALE_AT.toFixed(1)});
    var alpha = 1.0;
    if (grows) {
      let mn = max(m, bm);
      alpha = select(0.0, exp(m - mn), m > neg_inf());
      m = mn;
      l = l * alpha;
      flags[0] = 1u;
    }
    var ps = 0.0;
${
    range(HALF).map((c) =>
      `    {
      let p = select(0.0, exp(sv[${c}] - m), sv[${c}] > neg_inf());
      ps += p;
      Ps[(${pRegion}) + row * ${PS}u + ${keyOf(c)}] = f16(p);
    }`
    ).join("\n")
  }
    l += ps + subgroupShuffleXor(ps, 1u);
    if (hc == 0u) { Ls[sg * 16u + row] = alpha; }
    let rescaling = workgroupUniformLoad(&flags[0]);
    if (lid == 0u) { flags[0] = 0u; }
    // O is zero until a block has been multiplied in: nothing to rescale
    if (rescaling != 0u && started) {
${rounds("      Ss[(" + region + ") + x] *= Ls[sg * 16u + r];", true)}
    }
${multiplyPV(KEYS, Dv, 4, PS, VS)}
    started = true;
  }`
  const variant = {
    family: "flash_attn_tiles",
    D,
    Dv,
    mask,
    sinks,
    softcap,
    subgroups: SG,
    prefetch,
    spread,
    ...(split ? { splits: SPLITS } : {})
  }
  // split: each split's partials after the result (in elements from its first), merged by a second dispatch
  const parts = partsOf(node, SPLITS)
  const d: Operand = { name: "d", tensor: node, extent: Tensor.nbytes(node) + 4 * parts * (Dv + 2) }
  const splitParams = [u32("nsplit", SPLITS), u32("scratch", Tensor.nelements(node)), u32("parts", parts)]
  const partial = "((b * nq + ii) * P.q_ne2 + h) * P.nsplit + sp"
  const kernel = matrixKernel(
    variant,
    split ? operands.map((o) => (o.name === "d" ? d : o)) : operands,
    split ? [...params, ...splitParams] : params,
    q,
    ROWS,
    `
var<workgroup> Ks: array<vec4<f16>, ${(KEYS * KS) / 4}>;
var<workgroup> Vs: array<vec4<f16>, ${(KEYS * VS) / 4}>;
var<workgroup> Ss: array<f32, ${SG * 16 * SS}>;
var<workgroup> Ps: array<f16, ${SG * 16 * PS}>;
var<workgroup> Ls: array<f32, ${ROWS}>;
// [0]: a subgroup rescales this block, [1]: a row sees a key of it. An array of 256 bytes: beside a scalar
// workgroup variable the subgroup-matrix loads read garbage on the H200 (a 4-byte variable misaligning the
// tiles, by the look of it), so every workgroup variable here is a multiple of 256 bytes
var<workgroup> flags: array<u32, 64>;
${tileEntry(ROWS, THREADS, SPLITS)}
  // the workgroup's keys: its split's whole blocks
${
      split
        ? `  let j_per = ((nkv + ${SPLITS * KEYS - 1}u) / ${SPLITS * KEYS}u) * ${KEYS}u;
  let j_first = sp * j_per;
  let j_end = min(nkv, j_first + j_per);`
        : `  let j_first = 0u;
  let j_end = nkv;`
    }
  // Q as D / 16 left fragments, staged 16 columns at a time through Ps
${
      range(D / 16).map((s) =>
        `  for (var x = lid; x < ${ROWS * 16}u; x += ${THREADS}u) {
    let ii = i0 + x / 16u;
    var val = 0.0;
    if (ii < nq) { val = ld_q(ix_q(${s * 16}u + x % 16u, ii, h, b)); }
    Ps[x] = f16(val);
  }
  workgroupBarrier();
  let q${s} = subgroupMatrixLoad<${LEFT}>(&Ps, sg * 256u, 16u);
  workgroupBarrier();`
      ).join("\n")
    }
  var zero: ${RESULT};
${range(Dv / 16).map((n) => `  var o${n}: ${RESULT};`).join("\n")}
  // (split, the merge weighs in the sink)
  var m = ${sinks && !split ? "ld_s(ix_s(h, 0u, 0u, 0u))" : "neg_inf()"};
  var l = ${sinks && !split ? "1.0" : "0.0"};
  var started = false;
  var kr: array<vec4<u32>, ${loadsOf(D)}>;
  var vr: array<vec4<u32>, ${loadsOf(Dv)}>;${mask && prefetch ? `\n  var mkn: array<vec4<u32>, ${maskWords}>;` : ""}
  {
    let j0 = j_first;
${prefetch ? fetchBoth("j0") : ""}${mask && prefetch ? `\n${maskFetch("mkn", "j0")}` : ""}
  }
${loop}
${
      split
        ? `  let base = P.d_o + P.scratch;
  if (hc == 0u && i < nq) {
    let ii = i;
    let pi = ${partial};
    st_d(base + pi * 2u, m);
    st_d(base + pi * 2u + 1u, l);
  }
${
          rounds(
            `      let ii = i0 + sg * 16u + r;
      if (ii < nq) { st_d(base + P.parts * 2u + (${partial}) * ${Dv}u + n * 16u + e % 16u, Ss[(${region}) + x]); }`,
            false
          )
        }`
        : `  if (hc == 0u) { Ls[sg * 16u + row] = select(0.0, 1.0 / l, l > 0.0); }
${
          rounds(
            `      let ii = i0 + sg * 16u + r;
      if (ii < nq) { st_d(ix_d(n * 16u + e % 16u, h, ii, b), Ss[(${region}) + x] * Ls[sg * 16u + r]); }`,
            false
          )
        }`
    }
}`,
    SPLITS
  )
  const merge = split
    ? mergeKernel({
      d,
      sinks: operands.find((o) => o.name === "s")?.tensor,
      params: splitParams,
      Dv,
      splits: SPLITS,
      lanes: 32,
      rows: q.ne[1] * q.ne[2] * q.ne[3],
      target
    })
    : undefined
  return { ...kernel, vec4: true, wide: true, fallback, ...(merge ? { next: merge } : {}) }
}
