/**
 * Attention's decode form (flash decoding, few query rows): the keys split over workgroups as well as the
 * heads, each split's partial softmax merged by a second dispatch (attentionMerge.ts).
 *
 * @internal
 */
import * as DType from "@effect-gpu/core/DType"
import type { Op } from "@effect-gpu/core/Op"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import { finishRow, MAX_SPLITS, mergeKernel } from "./attentionMerge.js"
import type { Kernel, KernelTarget, Operand, Param } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, f32, range, repeat, SUBGROUP_LANES, u32 } from "./kernel.js"
import { alibiSlope, headLog2 } from "./reduce.js"
import { ropeAngle } from "./rope.js"

/**
 * The decode form (few query rows, flash decoding): the keys split across workgroups as well as heads, so
 * that a single query row still fills the GPU. A workgroup takes one query row, a run of heads sharing a
 * KV head (their K and V rows are read once) and one split of the keys; each subgroup walks its keys a
 * block at a time with its own online softmax (the scores' lanes across the keys, or across the head
 * dimension with a subgroup sum a score; the values' lanes across the head dimension), and the subgroups
 * combine through workgroup memory. With more than one split, each writes its (max, sum, output) into
 * scratch after the result and a second dispatch merges the splits (and the sink).
 */
export interface DecodePlan {
  /**
   * the scores' lanes: across the keys (a key a lane, q from workgroup memory: two subgroup reductions a
   * head and block of 32 keys), or across the head dimension (a subgroup sum a score, K and V rows loaded
   * together): the keys form is faster at long caches (benchmarks/RESULTS.md, choices: attention)
   */
  readonly across: "keys" | "dims"
  /** lanes of a subgroup, subgroups per workgroup */
  readonly lanes: number
  readonly subgroups: number
  /** heads per workgroup (a divisor of the heads per KV head) and keys per block of a subgroup */
  readonly heads: number
  readonly block: number
  readonly splits: number
  /**
   * the keys form's lanes a key's score: with 4, each of a subgroup's passes scores W / 4 keys, 4 lanes
   * reading consecutive 8 bytes of a K row and adding by shuffles, so that a load touches W / 4 rows, not W
   * (faster: benchmarks/RESULTS.md, choices: attention); 1, a key a lane
   */
  readonly keyLanes: number
  /**
   * the keys form's V rows of a block loaded into registers with its K rows, before the scores, so that both
   * are in flight together (not the V rows' loads issued once the scores are in); the default where they fit
   * 32 vec4 registers a lane
   */
  readonly valuesAhead: boolean
}

/** the most query rows the decode form takes (beyond, rows give the GPU enough workgroups) */
const DECODE_ROWS = 8
/**
 * keys a workgroup takes at least before the keys are split further: a block per subgroup on GPUs (a
 * decoding step's 8 KV heads over 640 keys then make 160 workgroups, not 40), 128 on software adapters
 */
const keysPerSplit = (target: KernelTarget) => (target.software === true ? 128 : 32)
/** workgroups decode attention should give a GPU at least (two a multiprocessor on an H200) */
const FILL = 256
/** values each lane keeps per head (q and the output accumulators) and per block key (K and V) */
const LANE_VALUES = 64

/** @internal: the decode form for a flash_attn_ext node on `target`, or undefined where it does not apply */
export const decodePlan = (node: Tensor.Tensor, target: KernelTarget): DecodePlan | undefined => {
  const [q, k, v] = node.src
  const lanes = target.subgroupSize
  const tag = node.op._tag
  if ((tag !== "FlashAttnExt" && tag !== "RopeFlashAttnExt") || target.subgroups !== true) return undefined
  if (lanes === undefined || lanes < 4) return undefined
  if (q.ne[1] > DECODE_ROWS || q.ne[2] % k.ne[2] !== 0 || k.ne[2] !== v.ne[2]) return undefined
  const perLane = Math.ceil(q.ne[0] / lanes) + Math.ceil(v.ne[0] / lanes)
  if (perLane > LANE_VALUES) return undefined
  const group = q.ne[2] / k.ne[2]
  const force = target.attentionDecode
  // the heads a workgroup may take: divisors of the group whose q and output fit the lanes' registers
  const fits = range(group).map((d) => d + 1).filter((d) => group % d === 0 && d * perLane <= LANE_VALUES)
  const subgroups = force?.subgroups ?? (target.software === true ? 2 : 4)
  const block = force?.block ?? Math.max(1, Math.min(8, Math.floor(LANE_VALUES / perLane)))
  const most = target.software === true ? 8 : 64
  // keys across lanes on GPUs where K's and V's rows load four at a time (not on lavapipe, where every
  // invocation costs: benchmarks/RESULTS.md, lavapipe)
  const across = force?.across ??
    (target.software !== true && widens(k) && widens(v) && q.ne[0] % 4 === 0 ? "keys" : "dims")
  // a block of keys per subgroup a split
  const perSplit = across === "keys" ? lanes * subgroups : keysPerSplit(target)
  const splitsFor = (heads: number) => {
    const rows = q.ne[1] * q.ne[3] * k.ne[2] * (group / heads)
    return Math.max(
      1,
      Math.min(k.ne[1], MAX_SPLITS, force?.splits ?? (rows >= 512 ? 1 : Math.min(most, Math.ceil(k.ne[1] / perSplit))))
    )
  }
  const workgroups = (heads: number) => q.ne[1] * q.ne[3] * k.ne[2] * (group / heads) * splitsFor(heads)
  // the most heads that still give FILL workgroups (K and V rows read once for them), else one: a
  // workgroup's chain of loads and reductions, not the bytes, sets decode attention's time, and four
  // heads a workgroup left an 8B model's 8 KV heads over a short cache far too few workgroups
  // (benchmarks/RESULTS.md, choices: attention)
  const fill = target.software === true ? 1 : FILL
  const chosen = [...fits].reverse().find((d) => workgroups(d) >= fill) ?? fits[0]
  const heads = force?.heads !== undefined && fits.includes(force.heads) ? force.heads : chosen
  // 4 lanes a key where each takes whole vec4s of the row and a subgroup's keys make whole passes
  const groups = q.ne[0] % 16 === 0 && lanes % 4 === 0 ? 4 : 1
  const keyLanes = force?.keyLanes === 1 || force?.keyLanes === groups ? force.keyLanes : groups
  // V rows ahead where a lane's share of a block's rows stays within 32 vec4 registers (faster decoding,
  // benchmarks/RESULTS.md, choices: attention)
  const valuesAhead = force?.valuesAhead ?? lanes * Math.ceil(v.ne[0] / (4 * lanes)) <= 32
  return { across, lanes, subgroups, heads, block, splits: splitsFor(heads), keyLanes, valuesAhead }
}

/** the partial results of a decode plan: one per query row, head and split */
const partsOf = (node: Tensor.Tensor, plan: DecodePlan) =>
  node.src[0].ne[1] * node.src[0].ne[2] * node.src[0].ne[3] * plan.splits

/**
 * @internal: the bytes of scratch a flash_attn_ext node's kernel keeps after its result on `target`: each
 * split's max, sum and output row, where the keys are split
 */
export const scratchBytes = (node: Tensor.Tensor, target: KernelTarget): number => {
  const plan = decodePlan(node, target)
  return plan === undefined || plan.splits === 1 ? 0 : 4 * partsOf(node, plan) * (node.src[2].ne[0] + 2)
}

/** whole rows of 4 (8 or 16 bytes) per load: K's or V's rows contiguous runs of fours */
/** @internal */
export const widens = (t: Tensor.Tensor) =>
  t.ne[0] % 4 === 0 && t.nb[0] === DType.typeSize(t.dtype) &&
  t.nb.slice(1).every((nb) => (nb / DType.typeSize(t.dtype)) % 4 === 0)

/** @internal: flash_attn_ext, or it with q rotated first (rope_flash_attn_ext) */
export type AttentionOp = Extract<Op, { _tag: "FlashAttnExt" | "RopeFlashAttnExt" }>

/**
 * @internal: how a form reads q: WGSL fn q_at(e, i, h, b), element e of query row i and head h, rotated
 * where the op is rope_flash_attn_ext (by the positions, operand p, and frequency factors, operand f;
 * modes 0 and 2), with the operands and parameters that takes
 */
export const queryOf = (node: Tensor.Tensor, op: AttentionOp) => {
  if (op._tag === "FlashAttnExt") {
    return {
      code: "fn q_at(e: u32, i: u32, h: u32, b: u32) -> f32 { return ld_q(ix_q(e, i, h, b)); }",
      operands: [] as Array<Operand>,
      params: [] as ReadonlyArray<Param>
    }
  }
  const at = 3 + (op.hasMask ? 1 : 0) + (op.hasSinks ? 1 : 0)
  const operands: Array<Operand> = [{ name: "p", tensor: node.src[at] }]
  if (op.rope.hasFreqFactors) operands.push({ name: "f", tensor: node.src[at + 1] })
  const angle = ropeAngle(op.rope)
  // mode 0 turns adjacent pairs, mode 2 (neox) the halves of the first n_dims; the rest is q's own
  const pair = op.rope.mode === 0
    ? "let j = e / 2u;\n  let e0 = 2u * j;\n  let e1 = e0 + 1u;"
    : "let j = e % (P.n_dims / 2u);\n  let e0 = j;\n  let e1 = j + P.n_dims / 2u;"
  return {
    code: `${angle.code}
fn q_at(e: u32, i: u32, h: u32, b: u32) -> f32 {
  if (e >= P.n_dims) { return ld_q(ix_q(e, i, h, b)); }
  ${pair}
  let cs = rope_cs(j, f32(ldi_p(ix_p(i, 0u, 0u, 0u))));
  let x0 = ld_q(ix_q(e0, i, h, b));
  let x1 = ld_q(ix_q(e1, i, h, b));
  return select(x0 * cs.y + x1 * cs.x, x0 * cs.x - x1 * cs.y, e == e0);
}`,
    operands,
    params: angle.params
  }
}

/** the operands, parameters and ALiBi slope every form shares */
/** @internal */
export const shared = (node: Tensor.Tensor, op: AttentionOp) => {
  const [q, k, v] = node.src
  const mask = op.hasMask ? node.src[3] : undefined
  const sinks = op.hasSinks ? node.src[op.hasMask ? 4 : 3] : undefined
  const params = [
    f32("scale", op.scale),
    f32("max_bias", op.maxBias),
    f32("softcap", op.logitSoftcap),
    u32("n_head_log2", headLog2(q.ne[2]))
  ]
  return { q, k, v, mask, sinks, params }
}

/** @internal: the decode form's kernel (and its merge where the keys are split) */
export const decodeKernel = (
  node: Tensor.Tensor,
  op: AttentionOp,
  plan: DecodePlan,
  target: KernelTarget,
  fallback: Kernel,
  wide: boolean
): Kernel => {
  const { k, mask, params, q, sinks, v } = shared(node, op)
  const { block: KB, heads: HG, lanes: W, splits, subgroups: S } = plan
  const D = q.ne[0]
  const Dv = v.ne[0]
  // a lane's share of a row: U consecutive values at a time (one 8- or 16-byte load where wide)
  const U = wide ? 4 : 1
  const T = wide ? "vec4<f32>" : "f32"
  const RD = Math.ceil(D / (U * W))
  const RV = Math.ceil(Dv / (U * W))
  const loadK = (base: string, e: string) => wide ? `ld4_k((${base} + ${e}) >> 2u)` : `ld_k(${base} + ${e} * P.k_nb0)`
  const loadV = (base: string, e: string) => wide ? `ld4_v((${base} + ${e}) >> 2u)` : `ld_v(${base} + ${e} * P.v_nb0)`
  const loadQ = (e: string, hh: string) =>
    wide
      ? `vec4<f32>(${range(4).map((c) => `q_at(${e} + ${c}u, i, h0 + ${hh}, b)`).join(", ")})`
      : `q_at(${e}, i, h0 + ${hh}, b)`
  const dotOf = (x: string, y: string) => wide ? `dot(${x}, ${y})` : `${x} * ${y}`
  const split = splits > 1
  const softcap = op.logitSoftcap !== 0
  // a mask shared by the heads (ggml's usual [keys, rows, 1, 1]) is loaded with the block's K and V rows,
  // once a key: a load a head and key after each score kept every score waiting on a load
  const sharedMask = mask !== undefined && mask.ne[2] === 1
  const parts = partsOf(node, plan)
  const out = KernelSpec.writesOut(target)
  // scratch (in elements from the result's first): each part's max and sum, then each part's output row
  const scratch = Tensor.nelements(node)
  const extent = Tensor.nbytes(node) + 4 * parts * (Dv + 2)
  const d: Operand = split ? { name: "d", tensor: node, extent } : { name: "d", tensor: node }
  const operands: Array<Operand> = [{ name: "q", tensor: q }, { name: "k", tensor: k }, { name: "v", tensor: v }, d]
  if (mask) operands.push({ name: "m", tensor: mask })
  if (sinks) operands.push({ name: "s", tensor: sinks })
  const query = queryOf(node, op)
  operands.push(...query.operands)
  const splitParams = [u32("nsplit", splits), u32("scratch", scratch), u32("parts", parts)]
  const groups = q.ne[1] * q.ne[3] * k.ne[2] * (q.ne[2] / k.ne[2] / HG) * splits
  const finish = finishRow(sinks !== undefined)
  const reduce = split
    ? mergeKernel({ d, sinks, params: splitParams, Dv, splits, lanes: W, rows: q.ne[1] * q.ne[2] * q.ne[3], target })
    : undefined
  const D4 = D / 4
  const dimsBody = `  var qr: array<${T}, ${HG * RD}>;
  var mx: array<f32, ${HG}>;
  var sum: array<f32, ${HG}>;
  var acc: array<${T}, ${HG * RV}>;
  var slopes: array<f32, ${HG}>;
  ${
    repeat(HG, "hh", out, (hh) =>
      `${
        repeat(RD, "r", out, (r) =>
          `let e = ${U}u * (sgl + ${r} * ${W}u);
if (e < ${D}u) { qr[${hh} * ${RD}u + ${r}] = ${loadQ("e", hh)}; }`)
      }
mx[${hh}] = neg_inf();
slopes[${hh}] = slope_of(h0 + ${hh});`)
  }
  for (var j0 = j_begin + sg * ${KB}u; j0 < j_end; j0 += ${S * KB}u) {
    var kr: array<${T}, ${KB * RD}>;
    var vr: array<${T}, ${KB * RV}>;${
    sharedMask ?
      `
    var mk: array<f32, ${KB}>;` :
      ""
  }
    ${
    repeat(KB, "kk", out, (kk) =>
      `let j = j0 + ${kk};
if (j < j_end) {${
        sharedMask ?
          `
  mk[${kk}] = ld_m(ix_m(j, i, 0u, b % P.m_ne3));` :
          ""
      }
  let kb = ix_k(0u, j, g, kb3);
  let vb = ix_v(0u, j, g, vb3);
  ${
        repeat(RD, "r", out, (r) =>
          `let e = ${U}u * (sgl + ${r} * ${W}u);
if (e < ${D}u) { kr[${kk} * ${RD}u + ${r}] = ${loadK("kb", "e")}; }`)
      }
  ${
        repeat(RV, "r", out, (r) =>
          `let e = ${U}u * (sgl + ${r} * ${W}u);
if (e < ${Dv}u) { vr[${kk} * ${RV}u + ${r}] = ${loadV("vb", "e")}; }`)
      }
}`)
  }
    ${
    repeat(HG, "hh", out, (hh) =>
      `var sc: array<f32, ${KB}>;
var bm = mx[${hh}];
${
        repeat(KB, "kk", out, (kk) =>
          `var qk = 0.0;
${repeat(RD, "r", out, (r) => `qk += ${dotOf(`qr[${hh} * ${RD}u + ${r}]`, `kr[${kk} * ${RD}u + ${r}]`)};`)}
var x = subgroupAdd(qk) * P.scale;${softcap ? "\nx = P.softcap * tanh_s(x / P.softcap);" : ""}
let j = j0 + ${kk};
if (j < j_end) {${
            mask === undefined
              ? ""
              : sharedMask
              ? `\n  x += slopes[${hh}] * mk[${kk}];`
              : `\n  x += slopes[${hh}] * ld_m(ix_m(j, i, (h0 + ${hh}) % P.m_ne2, b % P.m_ne3));`
          }
} else { x = neg_inf(); }
sc[${kk}] = x;
bm = max(bm, x);`)
      }
let corr = select(0.0, exp(mx[${hh}] - bm), mx[${hh}] > neg_inf());
var ps = 0.0;
${
        repeat(KB, "kk", out, (kk) =>
          `let p = select(0.0, exp(sc[${kk}] - bm), sc[${kk}] > neg_inf());
sc[${kk}] = p;
ps += p;`)
      }
sum[${hh}] = sum[${hh}] * corr + ps;
${
        repeat(RV, "r", out, (r) =>
          `var o = acc[${hh} * ${RV}u + ${r}] * corr;
${repeat(KB, "kk", out, (kk) => `o += sc[${kk}] * vr[${kk} * ${RV}u + ${r}];`)}
acc[${hh} * ${RV}u + ${r}] = o;`)
      }
mx[${hh}] = bm;`)
  }
  }
`
  // the keys form's scores: a key a lane, each lane reading its K row; or KL lanes a key, each pass of the
  // subgroup scoring W / KL keys (lane group kg's key j0 + p * W / KL + kg, lane kq of it reading the row's
  // vec4s kq, kq + KL, ...), the group's sums added by shuffles, then each lane's own key's score fetched
  const KL = plan.keyLanes
  const KP = W / KL
  const single = repeat(D4, "c", out, (c) =>
    `let k4 = ld4_k((kb + 4u * ${c}) >> 2u);
${range(HG).map((hh) => `sc[${hh}] += dot(qs[${hh * D4}u + ${c}], k4);`).join("\n")}`)
  const grouped = `let kq = sgl % ${KL}u;
    ${
    repeat(KL, "p", out, (p) =>
      `{
  let kp = ix_k(0u, min(j0 + ${p} * ${KP}u + sgl / ${KL}u, j_end - 1u), g, kb3);
  var part = array<f32, ${HG}>();
  ${
        repeat(D4 / KL, "c", out, (c) =>
          `let e = kq + ${c} * ${KL}u;
let k4 = ld4_k((kp + 4u * e) >> 2u);
${range(HG).map((hh) => `part[${hh}] += dot(qs[${hh * D4}u + e], k4);`).join("\n")}`)
      }
  ${
        range(HG).map((hh) =>
          `${range(Math.log2(KL)).map((b) => `part[${hh}] += subgroupShuffleXor(part[${hh}], ${1 << b}u);`).join(" ")}
  let got${hh} = subgroupShuffle(part[${hh}], (sgl % ${KP}u) * ${KL}u);
  sc[${hh}] = select(sc[${hh}], got${hh}, sgl / ${KP}u == ${p});`
        ).join("\n  ")
      }
}`)
  }`
  // a lane's four values r of a V row from its first element vb (lanes past Dv read its last four)
  const valueAt = (vb: string, r: number, load = "ld4_v") =>
    `${load}((${vb} + min(4u * (sgl + ${r * W}u), ${Dv - 4}u)) >> 2u)`
  // values ahead: the block's V rows (this lane's fours of each key's) loaded into va with its K rows, kept
  // in V's own type (f16 V: half the registers)
  const ahead = plan.valuesAhead
  const halfV = v.dtype === "f16"
  const valueLoads = `var va: array<${halfV ? "vec4<f16>" : "vec4<f32>"}, ${W * RV}>;
    ${
    repeat(W, "jj", out, (jj) =>
      `{
  let vb = ix_v(0u, min(j0 + ${jj}, j_end - 1u), g, vb3);
${range(RV).map((r) => `  va[${jj} * ${RV}u + ${r}u] = ${valueAt("vb", r, halfV ? "ldh4_v" : "ld4_v")};`).join("\n")}
}`)
  }`
  const keysBody = `  var mx: array<f32, ${HG}>;
  var sum: array<f32, ${HG}>;
  var acc: array<vec4<f32>, ${HG * RV}>;
  var slopes: array<f32, ${HG}>;
  for (var x = lid; x < ${HG * D4}u; x += ${W * S}u) {
    let e = 4u * (x % ${D4}u);
    let hq = h0 + x / ${D4}u;
    qs[x] = vec4<f32>(${range(4).map((c) => `q_at(e + ${c}u, i, hq, b)`).join(", ")});
  }
  ${repeat(HG, "hh", out, (hh) => `mx[${hh}] = neg_inf();\nslopes[${hh}] = slope_of(h0 + ${hh});`)}
  workgroupBarrier();
  for (var j0 = j_begin + sg * ${W}u; j0 < j_end; j0 += ${S * W}u) {
    // the scores: a key a lane (rows past the split's end read its last and score -inf)
    let j = j0 + sgl;
    let valid = j < j_end;
    let jr = min(j, j_end - 1u);
    let kb = ix_k(0u, jr, g, kb3);
${
    ahead
      ? `    ${valueLoads}\n`
      : ""
  }    // zeroed each block explicitly: a declaration alone kept the last block's sums on lavapipe
    var sc = array<f32, ${HG}>();
    ${KL === 1 ? single : grouped}${sharedMask ? `\n    let mk = ld_m(ix_m(jr, i, 0u, b % P.m_ne3));` : ""}
    var pr: array<f32, ${HG}>;
    ${
    repeat(HG, "hh", out, (hh) =>
      `var x = sc[${hh}] * P.scale;${softcap ? "\nx = P.softcap * tanh_s(x / P.softcap);" : ""}${
        mask === undefined
          ? ""
          : sharedMask
          ? `\nx += slopes[${hh}] * mk;`
          : `\nx += slopes[${hh}] * ld_m(ix_m(jr, i, (h0 + ${hh}) % P.m_ne2, b % P.m_ne3));`
      }
x = select(neg_inf(), x, valid);
let bm = max(mx[${hh}], subgroupMax(x));
let p = select(0.0, exp(x - bm), x > neg_inf());
let corr = select(0.0, exp(mx[${hh}] - bm), mx[${hh}] > neg_inf());
sum[${hh}] = sum[${hh}] * corr + subgroupAdd(p);
mx[${hh}] = bm;
pr[${hh}] = p;
${
        range(RV).map((r) => `acc[${hh} * ${RV}u + ${r}u] *= corr;`).join("\n")
      }`)
  }
    // the values: lanes across the head dimension, each key's weights passed from its lane; rows past the
    // end weigh 0, so every load is unconditional (lanes past Dv read its last four, never written out)
    ${
    repeat(W, "jj", out, (jj) =>
      `${ahead ? "" : `let vb = ix_v(0u, min(j0 + ${jj}, j_end - 1u), g, vb3);\n`}${
        range(HG).map((hh) =>
          `let p${hh} = subgroupShuffle(pr[${hh}], ${jj});`
        ).join("\n")
      }
${
        range(RV).map((r) =>
          `{
  let v4 = ${ahead ? `vec4<f32>(va[${jj} * ${RV}u + ${r}u])` : valueAt("vb", r)};
${
            range(HG).map((hh) => `  acc[${hh * RV + r}u] += p${hh} * v4;`).join("\n")
          }
}`
        ).join("\n")
      }`)
  }
  }
`
  return KernelSpec.make({
    variant: {
      family: "flash_attn_decode",
      ...(op._tag === "RopeFlashAttnExt"
        ? { rope: op.rope.mode, freqFactors: op.rope.hasFreqFactors, yarn: op.rope.extFactor !== 0 }
        : {}),
      across: plan.across,
      ...(plan.across === "keys" && plan.keyLanes > 1 ? { keyLanes: plan.keyLanes } : {}),
      ...(plan.across === "keys" && plan.valuesAhead ? { valuesAhead: true } : {}),
      out,
      wide,
      D,
      Dv,
      lanes: W,
      subgroups: S,
      heads: HG,
      block: KB,
      split,
      mask: mask === undefined ? false : sharedMask ? "shared" : "per-head",
      sinks: sinks !== undefined,
      softcap
    },
    enables: ["subgroups"],
    // each subgroup walks its own keys: its loop is uniform within the subgroup, which WGSL cannot see
    diagnosticsOff: ["subgroup_uniformity"],
    operands,
    params: [...params, ...splitParams, ...query.params],
    workgroups: fold(groups, target.maxWorkgroups),
    fallback,
    // rope's positions and factors stay scalar bindings (any offset) beside the vec4 ones
    ...(wide ? { vec4: true, scalar: query.operands.map((o) => o.name) } : {}),
    ...(reduce ? { next: reduce } : {}),
    main: `
${SUBGROUP_LANES}
var<workgroup> cm: array<f32, ${S * HG}>;
var<workgroup> cl: array<f32, ${S * HG}>;
var<workgroup> co: array<f32, ${S * HG * Dv}>;${
      plan.across === "keys" ?
        `
var<workgroup> qs: array<vec4<f32>, ${HG * D4}>;` :
        ""
    }
${query.code}
fn slope_of(h: u32) -> f32 {${alibiSlope("h")}
  return slope;
}
${entry(W * S, true)}
  var t = wg_linear(wid, nwg);
  let G = P.q_ne2 / P.k_ne2;
  let nch = G / ${HG}u;
  if (t >= P.nsplit * nch * P.k_ne2 * P.q_ne1 * P.q_ne3) { return; }
  let sp = t % P.nsplit;
  t /= P.nsplit;
  let ch = t % nch;
  t /= nch;
  let g = t % P.k_ne2;
  t /= P.k_ne2;
  let i = t % P.q_ne1;
  let b = t / P.q_ne1;
  let h0 = g * G + ch * ${HG}u;
  let sg = lid / sgs;
  let per = (P.k_ne1 + P.nsplit - 1u) / P.nsplit;
  let j_begin = sp * per;
  let j_end = min(P.k_ne1, j_begin + per);
  let kb3 = b % P.k_ne3;
  let vb3 = b % P.v_ne3;
${plan.across === "keys" ? keysBody : dimsBody}
  ${
      repeat(HG, "hh", out, (hh) =>
        `if (sgl == 0u) {
  cm[sg * ${HG}u + ${hh}] = mx[${hh}];
  cl[sg * ${HG}u + ${hh}] = sum[${hh}];
}
${
          repeat(RV, "r", out, (r) =>
            `let e = ${U}u * (sgl + ${r} * ${W}u);
if (e < ${Dv}u) {
${
              wide
                ? range(4).map((c) =>
                  `  co[(sg * ${HG}u + ${hh}) * ${Dv}u + e + ${c}u] = acc[${hh} * ${RV}u + ${r}][${c}];`
                )
                  .join("\n")
                : `  co[(sg * ${HG}u + ${hh}) * ${Dv}u + e] = acc[${hh} * ${RV}u + ${r}];`
            }
}`)
        }`)
    }
  workgroupBarrier();
  for (var x = lid; x < ${HG * Dv}u; x += ${W * S}u) {
    let hh = x / ${Dv}u;
    let e = x % ${Dv}u;
    let h = h0 + hh;
    var m = neg_inf();
    for (var s = 0u; s < ${S}u; s++) { m = max(m, cm[s * ${HG}u + hh]); }
    var l = 0.0;
    var o = 0.0;
    for (var s = 0u; s < ${S}u; s++) {
      let ms = cm[s * ${HG}u + hh];
      if (ms > neg_inf()) {
        let w = exp(ms - m);
        l += cl[s * ${HG}u + hh] * w;
        o += co[(s * ${HG}u + hh) * ${Dv}u + e] * w;
      }
    }
${
      split
        ? `    let pi = ((b * P.q_ne1 + i) * P.q_ne2 + h) * P.nsplit + sp;
    let base = P.d_o + P.scratch;
    if (e == 0u) {
      st_d(base + pi * 2u, m);
      st_d(base + pi * 2u + 1u, l);
    }
    st_d(base + P.parts * 2u + pi * ${Dv}u + e, o);`
        : `    ${finish("o", "l", "m")}`
    }
  }
}`
  })
}
