/**
 * f16 mul_mat on subgroup matrices (tensor cores), and the tilings it can take.
 *
 * @internal
 */
import type * as DType from "@effect-gpu/core/DType"
import * as Tensor from "@effect-gpu/core/Tensor"
import { fold } from "../wgsl.js"
import type { Kernel, MatrixTile, Operand } from "./kernel.js"
import * as KernelSpec from "./kernel.js"
import { entry, range, stridesAligned, u32, WG } from "./kernel.js"
import type { Product } from "./product.js"
import { eightAligned, fourAligned, origin, wholeBlocks } from "./product.js"
import { HALF_QUANTS, pieces } from "./quantizedMatVec.js"

/** elements between rows of a shared-memory tile: the depth plus 8 f16 of padding against bank conflicts */
const pad = (depth: number) => depth + 8

/** bytes of one 16 x 16 f32 result matrix, the least a binding takes a subgroup matrix's store into */
const MATRIX_BYTES = 16 * 16 * 4

/** @internal: invocations of a tiling's workgroup: one subgroup of 32 per 16x16-fragment block */
export const invocations = (t: MatrixTile): number => 32 * t.sgRows * t.sgCols

/** @internal: workgroup memory of a tiling: both staged tiles (f16) and one f32 fragment per subgroup */
export const sharedBytes = (t: MatrixTile): number =>
  2 * pad(t.depth) * 16 * (t.sgRows * t.fragRows + t.sgCols * t.fragCols) + 4 * 256 * t.sgRows * t.sgCols

/**
 * @internal: tilings in order of preference, the first that fits the device's workgroup memory and
 * invocations wins: 128 x 128 results per workgroup from 4 subgroups (128 invocations) as 2x2 with 4x4
 * fragments of 16x16 each, K in steps of 32 (24 KiB: several workgroups fit an SM); then, for devices
 * with 16 KiB of workgroup memory, one subgroup of 4x4 fragments, K in steps of 16 (7 KiB). The tilings
 * measured against them are in benchmarks/RESULTS.md (mul_mat f16).
 */
export const MATRIX_TILES: ReadonlyArray<MatrixTile> = [
  { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 4, depth: 32 },
  { sgRows: 1, sgCols: 1, fragRows: 4, fragCols: 4, depth: 16 }
]

/**
 * @internal: a block type whose prefetch keeps raw words: its bytes, the 32-bit words from its first byte that hold
 * its scale and quants, and its 32 values (8 vec4) from the scale `d` and the quants' word `q(i)` at byte
 * 2 + 4i
 */
export interface RawBlock {
  readonly bytes: number
  readonly words: number
  readonly decode: (d: string, q: (i: number) => string) => ReadonlyArray<string>
  /** WGSL: which quants' word vec4 `j` (a u32 expression) of a block takes */
  readonly wordOf: (j: string) => string
  /** WGSL: vec4 `j` from the scale `d` and its quants' word `q` */
  readonly vec4Of: (d: string, q: string, j: string) => string
  /** WGSL: the same as vec4<f16> from an f16 scale, decoded by HALF_QUANTS */
  readonly half4Of: (d: string, q: string, j: string) => string
}

/** @internal: the block types whose raw words kernels decode a vec4 at a time */
export const RAW_BLOCKS: Partial<Record<DType.Quantized, RawBlock>> = {
  q4_0: {
    bytes: 18,
    words: 5,
    decode: (d, q) => range(8).map((i) => `${d} * (${i < 4 ? "nib_lo" : "nib_hi"}(${q(i % 4)}) - 8.0)`),
    wordOf: (j) => `(${j} % 4u)`,
    vec4Of: (d, q, j) => `${d} * (select(nib_lo(${q}), nib_hi(${q}), ${j} >= 4u) - 8.0)`,
    half4Of: (d, q, j) => `${d} * nibs_h(select(${q}, ${q} >> 4u, ${j} >= 4u))`
  },
  q8_0: {
    bytes: 34,
    words: 9,
    decode: (d, q) => range(8).map((i) => `${d} * sbytes(${q(i)})`),
    wordOf: (j) => j,
    vec4Of: (d, q) => `${d} * sbytes(${q})`,
    half4Of: (d, q) => `${d} * sbytes_h(${q})`
  }
}

/** lanes sharing a row's block in the lane-shared loads: a lane a word, each lane decoding one vec4 */
const ROW_LANES = 8

/**
 * @internal: 64 x 64 results per workgroup from 2 subgroups of 2x4 fragments, for products whose 128 x 128
 * grid leaves the GPU short of workgroups (SMALL_GRID)
 */
export const SMALL_TILE: MatrixTile = { sgRows: 2, sgCols: 1, fragRows: 2, fragCols: 4, depth: 32 }

/**
 * @internal: workgroups of the preferred tiling below which a product takes SMALL_TILE: a 1B model's
 * prompt products ran faster so, an 8B model's, with more workgroups, slower (benchmarks/RESULTS.md,
 * choices: products)
 */
export const SMALL_GRID = 128

/**
 * @internal: 96 weight rows x 128 columns per workgroup (2x2 subgroups of 4x3 fragments): for an unsplit f16
 * product whose rows are whole blocks of it and whose 128 x 128 grid would leave its last wave part empty
 * (an 8B model's q/k/v, 192 workgroups: 256 of these fill one wave of SPLIT_FILL)
 */
export const FILL_TILE: MatrixTile = { sgRows: 2, sgCols: 2, fragRows: 4, fragCols: 3, depth: 32 }

/**
 * @internal: workgroups a product's grid should reach: a grid of fewer blocks splits their K ranges over
 * several workgroups each (split-K), up to MAX_SPLITS, each at least MIN_STEPS K steps long. Set for the
 * H200 (132 SMs, two of these workgroups resident on each): a block's workgroup alone on its SM left its
 * tensor cores waiting on its loads and barriers (benchmarks/RESULTS.md)
 */
export const SPLIT_FILL = 256
const MAX_SPLITS = 8
const MIN_STEPS = 16

/**
 * @internal: the workgroups a product's blocks split K over on a tiling: the tiling's own `splits`, else by
 * SPLIT_FILL; rounded so that every split has K steps to take
 */
export const splitsOf = (product: Product, t: MatrixTile): number => {
  // a product with a bias (mul_mat_add) is not split: its merge would add the bias, and prompts with their
  // residual sums made so ran slower (benchmarks/RESULTS.md)
  if (product.bias) return 1
  const steps = Math.ceil(product.K / t.depth)
  const asked = t.splits ??
    Math.min(MAX_SPLITS, Math.floor(SPLIT_FILL / gridOf(product, t)), Math.floor(steps / MIN_STEPS))
  const want = Math.max(1, Math.min(asked, steps))
  return Math.ceil(steps / Math.ceil(steps / want))
}

/**
 * @internal: whether FILL_TILE does a product's work in fewer workgroup-waves than `t` (waves of SPLIT_FILL
 * workgroups, each weighed by its tile's results): for unsplit products with whole blocks of it
 */
export const fillsBetter = (product: Product, t: MatrixTile): boolean => {
  const f = FILL_TILE
  const rows = f.sgCols * f.fragCols * 16
  if (product.M % rows !== 0 || splitsOf(product, t) > 1 || splitsOf(product, f) > 1) return false
  const cost = (m: MatrixTile) =>
    Math.ceil(gridOf(product, m) / SPLIT_FILL) * (m.sgCols * m.fragCols * 16) * (m.sgRows * m.fragRows * 16)
  return cost(f) < cost(t)
}

/** @internal: bytes of partial sums a split-K product keeps after its result (none where K is not split) */
export const splitScratch = (product: Product, t: MatrixTile): number => {
  const splits = splitsOf(product, t)
  return splits > 1 ? 4 * splits * product.M * product.N * product.batches : 0
}

/** @internal: workgroups of a product's grid on a tiling */
export const gridOf = (product: Product, t: MatrixTile): number =>
  Math.ceil(product.M / (t.sgCols * t.fragCols * 16)) * Math.ceil(product.N / (t.sgRows * t.fragRows * 16)) *
  product.batches

/** f16 per global load: 8 (wide: a vec4<u32> of 16 bytes), 4 (a vec4<f16>) or 1 */
type LoadWidth = 1 | 4 | 8

/**
 * `quantized`: a holds blocks of that type, staged as f16 a 32-value piece per row and K step (the depth
 * is 32); b may be f32, converted to f16 as it is staged
 */
const tiling = (
  product: Product,
  tile: MatrixTile,
  w: LoadWidth,
  quantized?: DType.Quantized,
  splits = 1
): Kernel => {
  const vec = w > 1
  const f32b = product.operands.find((o) => o.name === "b")!.tensor.dtype === "f32"
  const { depth: TK, fragCols: FC, fragRows: FR, sgCols: SC, sgRows: SR } = tile
  const threads = invocations(tile)
  const TN = SR * FR * 16
  const TM = SC * FC * 16
  const LS = pad(TK)
  const columnsFirst = tile.order !== "rows"
  const [rowBlocks, colBlocks] = [Math.ceil(product.M / TM), Math.ceil(product.N / TN)]
  // loads per thread per K step, of one tile of `rows` rows
  const loads = (rows: number) => Math.ceil((rows * TK) / w / threads)
  const guard = (rows: number) => (rows * TK) / w % threads !== 0
  // whole blocks (M, N and K multiples of the tile) load without bounds checks, which the H200 runs faster
  const whole = wholeBlocks(product, TM, TN, TK)
  const perRow = TK / w
  const load = (t: "x" | "w", rows: number) => {
    const [op, base, ld, r0, lim] = t === "x" ? ["b", "xb", "P.b_nb1", "n0", "N"] : ["a", "wb", "P.a_nb1", "m0", "M"]
    return range(loads(rows)).map((e) => {
      const at = `${base} + r * ${ld} + k`
      // an f32 b stays f32 in registers until it is staged: converting at the load waited on it at once
      const [value, zero] = w === 8
        ? [`ldw_${op}((${at}) >> 3u)`, "vec4<u32>()"]
        : vec && op === "b" && f32b
        ? [`ld4_b((${at}) >> 2u)`, "vec4<f32>()"]
        : vec
        ? [`ldh4_${op}((${at}) >> 2u)`, "vec4<f16>()"]
        : op === "b" && f32b
        ? [`ld_b(${at})`, "0.0"]
        : [`f16(ld_${op}(${at}))`, "0.0h"]
      const body = whole
        ? `${t}r[${e}] = ${value};`
        : `if (r < ${lim} && k < K) { ${t}r[${e}] = ${value}; } else { ${t}r[${e}] = ${zero}; }`
      const idx = `${e * threads}u + lid`
      const open = guard(rows) ? `if (${idx} < ${(rows * TK) / w}u) ` : ""
      const place = `let i = ${idx}; let r = ${r0} + i / ${perRow}u; let k = k0 + (i % ${perRow}u) * ${w}u;`
      return `    ${open}{ ${place} ${body} }`
    }).join("\n")
  }
  // vec: shared tiles are vec4<f16> arrays, so a staged vec4 is one 8-byte store; subgroup-matrix
  // offsets and strides then count vec4s (Dawn's row_major/col_major spelling accepts vector arrays)
  const sw = vec ? 4 : 1
  const stride = LS / sw
  const stash = (t: "x" | "w", rows: number) =>
    range(loads(rows)).map((e) => {
      const idx = `${e * threads}u + lid`
      const open = guard(rows) ? `if (${idx} < ${(rows * TK) / w}u) ` : ""
      const S = `${t.toUpperCase()}s`
      const r = `${t}r[${e}]`
      // wide: a load is two staged vec4<f16>
      const at = `(i / ${perRow}u) * ${stride}u + i % ${perRow}u${w === 8 ? " * 2u" : ""}`
      const store = w === 8
        ? `let o = ${at}; ${S}[o] = bitcast<vec4<f16>>(${r}.xy); ${S}[o + 1u] = bitcast<vec4<f16>>(${r}.zw);`
        : t === "x" && f32b
        ? `${S}[${at}] = ${vec ? "vec4<f16>" : "f16"}(${r});`
        : `${S}[${at}] = ${r};`
      return `    ${open}{ let i = ${idx}; ${store} }`
    }).join("\n")
  // quantized a: each thread dequantizes rows lid, lid + threads, ... of the tile, one 32-value piece each
  const rowsPerThread = TM / threads
  const qLoad = () =>
    range(rowsPerThread).map((e) =>
      `    { let v = piece(wb + min(m0 + lid + ${e * threads}u, M - 1u) * P.a_nb1, k0 / 32u); ${
        range(8).map((i) => `wr[${e * 8 + i}] = vec4<f16>(v[${i}]);`).join(" ")
      } }`
    ).join("\n")
  const qStash = () =>
    range(rowsPerThread).map((e) => {
      const row = `(lid + ${e * threads}u) * ${stride}u`
      return vec
        ? `    ${range(8).map((i) => `Ws[${row} + ${i}u] = wr[${e * 8 + i}];`).join(" ")}`
        : `    ${range(32).map((i) => `Ws[${row} + ${i}u] = wr[${e * 8 + (i >> 2)}][${i & 3}];`).join(" ")}`
    }).join("\n")
  // q4_0 and q8_0: the prefetch loads a block's raw words and the stash decodes them, so the next step's
  // loads stay in flight under this step's products (a prefetch that decoded waited on its loads at once)
  const raw = quantized === undefined ? undefined : RAW_BLOCKS[quantized]
  const rawLoad = (r: RawBlock) =>
    range(rowsPerThread).map((e) =>
      `    { let o = wb + min(m0 + lid + ${e * threads}u, M - 1u) * P.a_nb1 + (k0 / 32u) * ${r.bytes}u; qo[${e}] = o; ${
        range(r.words + 1).map((j) => `qw[${e * (r.words + 1) + j}] = qwi_a((o >> 2u) + ${j}u);`).join(" ")
      } }`
    ).join("\n")
  const rawStash = (r: RawBlock) =>
    range(rowsPerThread).map((e) => {
      const at = (j: number) => `qw[${e * (r.words + 1) + j}]`
      // blocks start at even bytes: where at 2 mod 4, a block's word j straddles two loaded words
      const words = range(r.words).map((j) =>
        `let w${j} = select(${at(j)}, (${at(j)} >> 16u) | (${at(j + 1)} << 16u), odd);`
      )
      const row = `(lid + ${e * threads}u) * ${stride}u`
      const v = r.decode("d", (i) => `((w${i} >> 16u) | (w${i + 1} << 16u))`)
      const put = vec
        ? range(8).map((i) => `Ws[${row} + ${i}u] = vec4<f16>(${v[i]});`)
        : range(32).map((i) => `Ws[${row} + ${i}u] = f16((${v[i >> 2]})[${i & 3}]);`)
      return `    {
      let odd = (qo[${e}] & 2u) != 0u;
      ${words.join("\n      ")}
      let d = half_lo(w0);
      ${put.join("\n      ")}
    }`
    }).join("\n")
  // lane-shared: 8 lanes a row, each loading one word of its block (a warp's load then touches 4 rows'
  // sectors where a lane a row touched 32), the words passed round by subgroup shuffles, each lane
  // decoding one vec4 of the row
  const rowsPerPass = threads / ROW_LANES
  const shared = raw !== undefined && vec && tile.laneLoads !== false && TM % rowsPerPass === 0
  const passes = TM / rowsPerPass
  const blockOffset = (r: RawBlock, e: number) =>
    `wb + min(m0 + lid / ${ROW_LANES}u + ${e * rowsPerPass}u, M - 1u) * P.a_nb1 + (k0 / 32u) * ${r.bytes}u`
  const laneLoad = (r: RawBlock) =>
    range(passes).map((e) =>
      `    { let w0 = (${blockOffset(r, e)}) >> 2u; qw[${e}] = qwi_a(w0 + min(lid % ${ROW_LANES}u, ${r.words - 1}u));${
        r.words > ROW_LANES ? ` qx[${e}] = qwi_a(w0 + ${ROW_LANES}u);` : ""
      } }`
    ).join("\n")
  const laneStash = (r: RawBlock) =>
    `    {
      let j = lid % ${ROW_LANES}u;
      let g = (lid % 32u) - j;
      let qi = ${r.wordOf("j")};
${
      range(passes).map((e) => {
        // the word after the quants' first: a neighbour's, or past the 8 lanes the lane's own extra word
        const next = r.words > ROW_LANES
          ? `select(subgroupShuffle(qw[${e}], g + min(qi + 1u, ${ROW_LANES - 1}u)), qx[${e}], qi + 1u >= ${ROW_LANES}u)`
          : `subgroupShuffle(qw[${e}], g + qi + 1u)`
        return `      {
        let odd = ((${blockOffset(r, e)}) & 2u) != 0u;
        let w0 = subgroupShuffle(qw[${e}], g);
        let lo = subgroupShuffle(qw[${e}], g + qi);
        let hi = ${next};
        let q = select((lo >> 16u) | (hi << 16u), hi, odd);
        let d = select(bitcast<vec2<f16>>(w0).x, bitcast<vec2<f16>>(w0).y, odd);
        Ws[(lid / ${ROW_LANES}u + ${e * rowsPerPass}u) * ${stride}u + j] = ${r.half4Of("d", "q", "j")};
      }`
      }).join("\n")
    }
    }`
  const loadW = () => quantized === undefined ? load("w", TM) : raw ? (shared ? laneLoad(raw) : rawLoad(raw)) : qLoad()
  const stashW = () =>
    quantized === undefined ? stash("w", TM) : raw ? (shared ? laneStash(raw) : rawStash(raw)) : qStash()
  const frag = (i: number, j: number) => `c${i}_${j}`
  const left = "subgroup_matrix_left<f16, 16, 16>, row_major"
  const right = "subgroup_matrix_right<f16, 16, 16>, col_major"
  const steps = range(TK / 16).map((s) => {
    const k = (s * 16) / sw
    const lines = [
      ...range(FR).map((i) => {
        const at = `(sr * ${FR * 16}u + ${i * 16}u) * ${stride}u + ${k}u`
        return `    let x${i} = subgroupMatrixLoad<${left}>(&Xs, ${at}, ${stride}u);`
      }),
      ...range(FC).map((j) => {
        const at = `(sc * ${FC * 16}u + ${j * 16}u) * ${stride}u + ${k}u`
        return `    let w${j} = subgroupMatrixLoad<${right}>(&Ws, ${at}, ${stride}u);`
      }),
      ...range(FR).flatMap((i) =>
        range(FC).map((j) => `    ${frag(i, j)} = subgroupMatrixMultiplyAccumulate(x${i}, w${j}, ${frag(i, j)});`)
      )
    ]
    return `    {\n${lines.join("\n")}\n    }`
  }).join("\n")
  // a block inside the result (or its split's partials), without a bias: each fragment stored straight from
  // its registers, rows a result row apart, without the two barriers a fragment of the path through
  // workgroup memory, which edges and the bias keep (benchmarks/RESULTS.md, choices: products)
  const resultNode = product.operands.find((o) => o.name === "d")!.tensor
  const split = splits > 1 ? splitK(product, TK, splits) : undefined
  // Dawn sizes a binding that a subgroup matrix is stored into for one whole matrix, whatever the offset, so
  // a smaller result (one a 16 x 16 block would overrun: its edges are stored through workgroup memory
  // anyway) keeps that path; a product with a bias is never split (splitsOf)
  const resultOperand = (split ? split.operands : product.operands).find((o) => o.name === "d")!
  const direct = product.epilogue === "" && Tensor.isContiguous(resultNode) &&
    (resultOperand.extent ?? Tensor.nbytes(resultNode)) >= MATRIX_BYTES
  const directStore = range(FR).flatMap((i) =>
    range(FC).map((j) => {
      const [m, nn] = [`m0 + sc * ${FC * 16}u + ${j * 16}u`, `n0 + sr * ${FR * 16}u + ${i * 16}u`]
      const at = splits > 1 ? `part + (${nn}) * M + ${m}` : `ix_d(${m}, ${nn}, b2, b3)`
      return `    smst_d(${at}, ${frag(i, j)}, ${splits > 1 ? "M" : "P.d_nb1"});`
    })
  ).join("\n")
  const inside = [whole ? "" : `m0 + ${TM}u <= M && n0 + ${TN}u <= N`, vec ? "M % 4u == 0u" : ""]
    .filter((c) => c !== "").join(" && ") || "true"
  const store = range(FR).flatMap((i) =>
    range(FC).map((j) =>
      `  subgroupMatrixStore<row_major>(&Cs, sg * 256u, ${frag(i, j)}, 16u);
  workgroupBarrier();
  for (var e = 0u; e < 8u; e++) {
    let i = lane + e * 32u;
    let nn = n0 + sr * ${FR * 16}u + ${i * 16}u + i / 16u;
    let m = m0 + sc * ${FC * 16}u + ${j * 16}u + i % 16u;
    if (nn < N && m < M) { ${
        splits > 1
          ? "st_d(part + nn * M + m, Cs[sg * 256u + i]);"
          : `var v = Cs[sg * 256u + i]; ${product.epilogue} st_d(ix_d(m, nn, b2, b3), v);`
      } }
  }
  workgroupBarrier();`
    )
  ).join("\n")
  const stores = direct
    ? `  if (${inside}) {\n${directStore}\n  } else {\n${store}\n  }`
    : store
  const vt = vec ? "vec4<f16>" : "f16"
  const rt = w === 8 ? "vec4<u32>" : vt
  const xt = f32b ? (vec ? "vec4<f32>" : "f32") : rt
  const wregs = quantized === undefined
    ? `array<${rt}, ${loads(TM)}>`
    : shared
    ? `array<u32, ${passes}>`
    : raw
    ? `array<u32, ${(raw.words + 1) * rowsPerThread}>`
    : `array<vec4<f16>, ${8 * rowsPerThread}>`
  // raw words: each row's block offset kept beside them (its alignment picks the words at stash time);
  // lane-shared: a block's ninth word, where it has one, loaded by every lane of the row
  const wname = raw ? "qw" : "wr"
  const offsets = shared
    ? raw.words > ROW_LANES ? `\n  var qx: array<u32, ${passes}>;` : ""
    : raw
    ? `\n  var qo: array<u32, ${rowsPerThread}>;`
    : ""
  const fragments = range(FR).flatMap((i) =>
    range(FC).map((j) => `  var ${frag(i, j)}: subgroup_matrix_result<f32, 16, 16>;`)
  )
  // stage, barrier, issue the next step's loads, multiply, barrier (the staging waits on every subgroup's
  // products; a second buffer staged under them ran slower: benchmarks/RESULTS.md, tried and not taken)
  const loop = `  for (var k0 = kb; k0 < ke; k0 += ${TK}u) {
${stash("x", TN)}
${stashW()}
    workgroupBarrier();
    if (k0 + ${TK}u < ke) {
      let k0 = k0 + ${TK}u;
${load("x", TN)}
${loadW()}
    }
${steps}
    workgroupBarrier();
  }`
  const kernel = KernelSpec.make({
    variant: {
      family: "mmsg",
      subgroups: `${SR}x${SC}`,
      fragments: `${FR}x${FC}`,
      depth: TK,
      load: w,
      bias: product.bias,
      whole,
      b: f32b ? "f32" : "f16",
      ...(quantized === undefined
        ? {}
        : { dtype: quantized, prefetch: shared ? "lanes" : raw ? "words" : "values" }),
      ...(splits > 1 ? { splits } : {}),
      ...(direct ? { direct } : {}),
      ...(columnsFirst ? {} : { order: "rows" })
    },
    enables: ["f16", "subgroups", "chromium_experimental_subgroup_matrix"],
    // Tint wants subgroup-matrix arguments provably uniform; per-subgroup offsets (lid / 32) are uniform
    // within each subgroup, but not provably so: the case this diagnostic exists to waive
    diagnosticsOff: ["chromium.subgroup_matrix_uniformity"],
    operands: split ? split.operands : product.operands,
    params: split ? [...product.params, ...split.params] : product.params,
    workgroups: columnsFirst
      ? [colBlocks, rowBlocks, product.batches * splits]
      : [rowBlocks, colBlocks, product.batches * splits],
    main: `
${quantized === undefined ? "" : pieces(quantized)}${shared ? `\n${HALF_QUANTS}` : ""}
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
${
      split
        ? `  // split-K: workgroup z covers batch z / splits, and K steps [kb, ke) of it; its partial sums go to
  // the scratch after the result, split by split
  let sp = wid.z % ${splits}u;
${origin(TM, TN, `(wid.z / ${splits}u)`, columnsFirst)}
  let kb = sp * P.per;
  let ke = min(K, kb + P.per);
  let part = P.d_o + P.scratch + (sp * P.d_ne2 * P.d_ne3 + wid.z / ${splits}u) * M * N;`
        : `${origin(TM, TN, "wid.z", columnsFirst)}
  let kb = 0u;
  let ke = K;`
    }
  let xb = ix_b(0u, 0u, b2, b3);
  let wb = ix_a(0u, 0u, b2 / P.r2, b3 / P.r3);
  var xr: array<${xt}, ${loads(TN)}>;
  var ${wname}: ${wregs};${offsets}
${fragments.join("\n")}
  {
    let k0 = kb;
${load("x", TN)}
${loadW()}
  }
${loop}
${stores}
}`
  })
  const withNext = split ? { ...kernel, next: split.merge } : kernel
  if (w === 8) {
    return { ...withNext, vec4: true, wide: true, fallback: tiling(product, tile, 4, quantized, splits) }
  }
  if (w === 4) return { ...withNext, vec4: true, fallback: tiling(product, tile, 1, quantized, splits) }
  // the last form of a split product falls back to the unsplit one where its scratch does not fit
  return split ? { ...withNext, fallback: tiling(product, tile, 1, quantized) } : withNext
}

/**
 * a split-K product's result operand reaching over its partial sums (after the result, split by split),
 * the parameters that place them, and the dispatch that adds them up into the result (only that: a product
 * with a bias is not split), which a reader may do in its place (splitsIn.ts)
 */
const splitK = (product: Product, TK: number, splits: number) => {
  const node = product.operands.find((o) => o.name === "d")!.tensor
  const count = product.M * product.N * product.batches
  const d: Operand = { name: "d", tensor: node, extent: Tensor.nbytes(node) + 4 * splits * count }
  const operands = product.operands.map((o) => (o.name === "d" ? d : o))
  const scratch = u32("scratch", Tensor.nbytes(node) / 4)
  const merge = KernelSpec.make({
    variant: { family: "mmsg_merge", splits },
    operands: [d],
    params: [scratch],
    workgroups: fold(Math.ceil(count / WG)),
    sums: { splits, count },
    main: `
${entry(WG)}
  let t = wg_linear(wid, nwg) * ${WG}u + lid;
  let M = P.d_ne0;
  let N = P.d_ne1;
  let count = M * N * P.d_ne2 * P.d_ne3;
  if (t >= count) { return; }
  let m = t % M;
  let nn = (t / M) % N;
  let b2 = (t / (M * N)) % P.d_ne2;
  let b3 = t / (M * N * P.d_ne2);
  let base = P.d_o + P.scratch + t;
  var v = 0.0;
${range(splits).map((s) => `  v += ld_d(base + ${s}u * count);`).join("\n")}
  st_d(ix_d(m, nn, b2, b3), v);
}`
  })
  return { operands, params: [scratch, u32("per", Math.ceil(product.K / TK / splits) * TK)], merge }
}

/**
 * @internal: a workgroup computes a (rows x cols) block of the result: per K step it stages b's rows
 * ("X", the left fragments) and a's rows ("W", read column-major as the right fragments) in shared
 * memory, prefetching the next step into registers while the fragments multiply. The result leaves
 * through shared memory one fragment at a time, so edges, the bias and any result layout are handled by
 * plain stores. Global loads take 16 bytes (eight f16) where K, the strides and offsets are multiples of
 * 8, else 8 bytes where they are multiples of 4, else one f16.
 */
export const subgroupMatrix = (
  product: Product,
  a: Tensor.Tensor,
  b: Tensor.Tensor,
  tile: MatrixTile
): Kernel => {
  // wide operands have no single-element loads, which the bias epilogue uses: an f16 bias keeps 8 bytes;
  // an f32 b (activations, converted to f16 as they are staged, as ggml's GPU backends convert them) loads
  // four at a time at most
  const f16Bias = product.operands.some((o) => o.name === "c" && o.tensor.dtype === "f16")
  const w: LoadWidth = eightAligned(product, a, b) && !f16Bias && b.dtype === "f16"
    ? 8
    : fourAligned(product, a, b)
    ? 4
    : 1
  return tiling(product, tile, w, undefined, splitsOf(product, tile))
}

/**
 * @internal: a quantized a on subgroup matrices: a's blocks dequantized into the staged f16 tile, b (f32
 * or f16) converted as it is staged; the tiling's depth must be 32 (one piece of a row per K step) and
 * its rows a multiple of its invocations. b loads eight at a time where it is f16 (16 bytes, as f16
 * weights' products load theirs), else four, where K and its strides allow.
 */
export const quantizedSubgroupMatrix = (
  product: Product,
  dtype: DType.Quantized,
  b: Tensor.Tensor,
  tile: MatrixTile
): Kernel => {
  const w: LoadWidth = b.dtype === "f16" && product.K % 8 === 0 && stridesAligned(b, 8)
    ? 8
    : product.K % 4 === 0 && stridesAligned(b, 4)
    ? 4
    : 1
  return tiling(product, tile, w, dtype, splitsOf(product, tile))
}

/** @internal: whether a tiling can stage quantized blocks: K steps of one piece, whole rows per thread */
export const stagesBlocks = (t: MatrixTile): boolean =>
  t.depth === 32 && (t.sgCols * t.fragCols * 16) % invocations(t) === 0
