/**
 * WGSL generation shared by every kernel: storage bindings (one per group of overlapping operands, so
 * in-place ops and views never alias two writable bindings), a uniform struct of parameters, and
 * per-operand accessors that hide where each operand lives and what type it is stored as.
 *
 * @internal
 */
import type { DType } from "@effect-gpu/core/DType"

/** @internal */
export interface OperandDecl {
  readonly name: string
  readonly dtype: DType
  readonly slot: number
  /** bound as vec4 arrays: ld4_/st4_ accessors index groups of 4 elements */
  readonly vec4?: boolean
  /** f16 bound as vec4<u32> arrays of 8 elements: ldw_ loads 8, stw_ stores 8 (its only accessors besides ix_) */
  readonly wide?: boolean
  /** its binding is read-write (else read-only), and it has store accessors */
  readonly writable?: boolean
}

/** @internal */
export interface Field {
  readonly name: string
  readonly type: "u32" | "f32" | "i32"
}

const storageType = (dtype: DType): string => {
  switch (dtype) {
    case "f32":
      return "f32"
    case "f16":
      return "f16"
    case "i32":
      return "i32"
    default:
      // quantized blocks are bytes, read from 32-bit words
      return "u32"
  }
}

const isQuantized = (dtype: DType) => dtype !== "f32" && dtype !== "f16" && dtype !== "i32"

/**
 * WGSL that reads element k of the quantized row starting at byte `row` of operand `n`: ldq_<n>(row, k),
 * over the byte readers qb_<n> (a byte), qs_<n> (a signed byte) and qh_<n> (an f16 at an even byte)
 */
const dequantizer = (n: string, dtype: DType): string => {
  const block = (values: number, bytes: number) => `let blk = row + (k / ${values}u) * ${bytes}u;`
  switch (dtype) {
    case "q8_0":
      return `fn ldq_${n}(row: u32, k: u32) -> f32 { ${
        block(32, 34)
      } return qh_${n}(blk) * f32(qs_${n}(blk + 2u + k % 32u)); }`
    case "q4_0":
    case "q4_1": {
      const [bytes, qs, min] = dtype === "q4_0" ? [18, 2, "- 8.0"] : [20, 4, ""]
      const add = dtype === "q4_1" ? ` + qh_${n}(blk + 2u)` : ""
      return `fn ldq_${n}(row: u32, k: u32) -> f32 {
  ${block(32, bytes)}
  let j = k % 32u;
  let b = qb_${n}(blk + ${qs}u + j % 16u);
  let q = select(b >> 4u, b & 15u, j < 16u);
  return qh_${n}(blk) * (f32(q) ${min})${add};
}`
    }
    case "q5_0":
      return `fn ldq_${n}(row: u32, k: u32) -> f32 {
  ${block(32, 22)}
  let j = k % 32u;
  let b = qb_${n}(blk + 6u + j % 16u);
  let lo = select(b >> 4u, b & 15u, j < 16u);
  let hi = (qb_${n}(blk + 2u + j / 8u) >> (j % 8u)) & 1u;
  return qh_${n}(blk) * (f32(lo | (hi << 4u)) - 16.0);
}`
    case "q4_K":
      return `fn ldq_${n}(row: u32, k: u32) -> f32 {
  ${block(256, 144)}
  let j = k % 256u;
  let c = j / 64u;
  let upper = (j % 64u) >= 32u;
  let s = 2u * c + select(0u, 1u, upper);
  let sc = select((qb_${n}(blk + 8u + s) & 15u) | ((qb_${n}(blk + s) >> 6u) << 4u), qb_${n}(blk + 4u + s) & 63u, s < 4u);
  let m = select((qb_${n}(blk + 8u + s) >> 4u) | ((qb_${n}(blk + 4u + s) >> 6u) << 4u), qb_${n}(blk + 8u + s) & 63u, s < 4u);
  let b = qb_${n}(blk + 16u + 32u * c + j % 32u);
  let q = select(b & 15u, b >> 4u, upper);
  return qh_${n}(blk) * f32(sc) * f32(q) - qh_${n}(blk + 2u) * f32(m);
}`
    case "q6_K":
      return `fn ldq_${n}(row: u32, k: u32) -> f32 {
  ${block(256, 210)}
  let j = k % 256u;
  let half = j / 128u;
  let r = j % 128u;
  let quarter = r / 32u;
  let l = r % 32u;
  let ql = qb_${n}(blk + 64u * half + l + 32u * (quarter & 1u));
  let lo = select(ql & 15u, ql >> 4u, quarter >= 2u);
  let hi = (qb_${n}(blk + 128u + 32u * half + l) >> (2u * quarter)) & 3u;
  let sc = f32(qs_${n}(blk + 192u + 8u * half + l / 16u + 2u * quarter));
  return qh_${n}(blk + 208u) * sc * f32(i32(lo | (hi << 4u)) - 32);
}`
    default:
      throw new Error(`no WGSL dequantizer for ${dtype}`)
  }
}

/** the fields every operand brings: its element offset, shape and element strides */
export const operandFields = (name: string): ReadonlyArray<Field> =>
  ["o", "ne0", "ne1", "ne2", "ne3", "nb0", "nb1", "nb2", "nb3"].map((f) => ({ name: `${name}_${f}`, type: "u32" }))

/** @internal */
export const header = (
  operands: ReadonlyArray<OperandDecl>,
  extra: ReadonlyArray<Field>,
  enables: ReadonlyArray<string> = [],
  diagnosticsOff: ReadonlyArray<string> = []
): string => {
  const slots = new Map<number, DType>()
  const vec = new Set<number>()
  const wide = new Set<number>()
  const written = new Set<number>()
  for (const o of operands) {
    slots.set(o.slot, o.dtype)
    if (o.vec4) vec.add(o.slot)
    if (o.vec4 && o.wide && o.dtype === "f16") wide.add(o.slot)
    if (o.writable) written.add(o.slot)
  }
  const f16 = [...slots.values()].includes("f16")
  const matrices = enables.includes("chromium_experimental_subgroup_matrix")
  const fields = [...operands.flatMap((o) => operandFields(o.name)), ...extra]
  const lines: Array<string> = []
  for (const e of new Set([...(f16 ? ["f16"] : []), ...enables])) lines.push(`enable ${e};`)
  for (const d of diagnosticsOff) lines.push(`diagnostic(off, ${d});`)
  for (const [slot, dtype] of [...slots.entries()].sort((a, b) => a[0] - b[0])) {
    const t = wide.has(slot) ? "vec4<u32>" : vec.has(slot) ? `vec4<${storageType(dtype)}>` : storageType(dtype)
    const access = written.has(slot) ? "read_write" : "read"
    lines.push(`@group(0) @binding(${slot}) var<storage, ${access}> B${slot}: array<${t}>;`)
  }
  lines.push(`struct Params {\n${fields.map((f) => `  ${f.name}: ${f.type},`).join("\n")}\n}`)
  lines.push(`@group(0) @binding(${slots.size}) var<uniform> P: Params;`)
  for (const o of operands) {
    const b = `B${o.slot}`
    const n = o.name
    if (isQuantized(o.dtype)) {
      // bytes of packed blocks: offsets and strides count bytes (blocks are 18-210 bytes, rarely 4-aligned)
      lines.push(
        `fn ix_${n}(i0: u32, i1: u32, i2: u32, i3: u32) -> u32 { return P.${n}_o + i0 * P.${n}_nb0 + i1 * P.${n}_nb1 + i2 * P.${n}_nb2 + i3 * P.${n}_nb3; }`
      )
      const word = vec.has(o.slot) ? `${b}[i >> 4u][(i >> 2u) & 3u]` : `${b}[i >> 2u]`
      lines.push(`fn qw_${n}(i: u32) -> u32 { return ${word}; }`)
      lines.push(`fn qb_${n}(i: u32) -> u32 { return (qw_${n}(i) >> ((i & 3u) * 8u)) & 0xffu; }`)
      lines.push(`fn qs_${n}(i: u32) -> i32 { return bitcast<i32>(qb_${n}(i) << 24u) >> 24u; }`)
      lines.push(
        `fn qh_${n}(i: u32) -> f32 { return unpack2x16float(qw_${n}(i) >> ((i & 2u) * 8u)).x; }`
      )
      lines.push(dequantizer(n, o.dtype))
      if (vec.has(o.slot)) lines.push(`fn qv_${n}(i: u32) -> vec4<u32> { return ${b}[i]; }`)
      // word i of the binding: how kernels that load whole blocks read them
      const wordAt = vec.has(o.slot) ? `${b}[i >> 2u][i & 3u]` : `${b}[i]`
      lines.push(`fn qwi_${n}(i: u32) -> u32 { return ${wordAt}; }`)
      // a whole word at a 4-aligned byte: how quantizing kernels write blocks
      if (written.has(o.slot) && !vec.has(o.slot)) lines.push(`fn qput_${n}(i: u32, v: u32) { ${b}[i >> 2u] = v; }`)
      continue
    }
    // stores only into read-write bindings: a store to a read-only one does not compile, even unused
    const store = (line: string) => {
      if (written.has(o.slot)) lines.push(line)
    }
    lines.push(
      `fn ix_${n}(i0: u32, i1: u32, i2: u32, i3: u32) -> u32 { return P.${n}_o + i0 * P.${n}_nb0 + i1 * P.${n}_nb1 + i2 * P.${n}_nb2 + i3 * P.${n}_nb3; }`
    )
    if (wide.has(o.slot)) {
      // 8 f16 per element, as raw bits (the kernel unpacks them with bitcast); the one accessor the kernels
      // that bind wide operands use: they read whole groups of 8 and write f32 results
      lines.push(`fn ldw_${n}(i: u32) -> vec4<u32> { return ${b}[i]; }`)
      // and 8 f16 a store, for kernels that write whole groups (the f16 copy of quantized weights)
      store(`fn stw_${n}(i: u32, v: vec4<u32>) { ${b}[i] = v; }`)
      continue
    }
    if (o.vec4) {
      const st = storageType(o.dtype)
      lines.push(`fn ld4_${n}(i: u32) -> vec4<f32> { return vec4<f32>(${b}[i]); }`)
      store(`fn st4_${n}(i: u32, v: vec4<f32>) { ${b}[i] = vec4<${st}>(v); }`)
      // a 16 x 16 f32 result matrix stored row-major from element i, rows `stride` elements apart (both
      // multiples of 4 here: offsets and strides count vec4s)
      if (matrices && o.dtype === "f32") {
        store(
          `fn smst_${n}(i: u32, m: subgroup_matrix_result<f32, 16, 16>, stride: u32) { subgroupMatrixStore<row_major>(&${b}, i >> 2u, m, stride >> 2u); }`
        )
      }
      if (o.dtype === "f16") lines.push(`fn ldh4_${n}(i: u32) -> vec4<f16> { return ${b}[i]; }`)
      // single elements of a vec4 binding, for kernels that load in fours and store one at a time
      lines.push(`fn ld_${n}(i: u32) -> f32 { return f32(${b}[i >> 2u][i & 3u]); }`)
      store(`fn st_${n}(i: u32, v: f32) { ${b}[i >> 2u][i & 3u] = ${st}(v); }`)
      continue
    }
    if (o.dtype === "i32") {
      lines.push(`fn ldi_${n}(i: u32) -> i32 { return ${b}[i]; }`)
      lines.push(`fn ld_${n}(i: u32) -> f32 { return f32(${b}[i]); }`)
      store(`fn st_${n}(i: u32, v: i32) { ${b}[i] = v; }`)
    } else {
      lines.push(`fn ld_${n}(i: u32) -> f32 { return f32(${b}[i]); }`)
      store(`fn st_${n}(i: u32, v: f32) { ${b}[i] = ${storageType(o.dtype)}(v); }`)
      if (matrices && o.dtype === "f32") {
        store(
          `fn smst_${n}(i: u32, m: subgroup_matrix_result<f32, 16, 16>, stride: u32) { subgroupMatrixStore<row_major>(&${b}, i, m, stride); }`
        )
      }
    }
  }
  lines.push(COMMON)
  return lines.join("\n")
}

/** math used by several kernels, written to be stable for large |x| */
const COMMON = `
fn neg_inf() -> f32 { var bits = 0xff800000u; return bitcast<f32>(bits); }
fn tanh_s(x: f32) -> f32 { let e = exp(-2.0 * abs(x)); return sign(x) * (1.0 - e) / (1.0 + e); }
fn sigmoid_s(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
fn gelu_s(x: f32) -> f32 { return 0.5 * x * (1.0 + tanh_s(0.7978845608028654 * x * (1.0 + 0.044715 * x * x))); }
fn silu_s(x: f32) -> f32 { return x / (1.0 + exp(-x)); }
fn gelu_quick_s(x: f32) -> f32 { return x / (1.0 + exp(-1.702 * x)); }
fn wg_linear(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }
`

/** workgroups for `n` groups, folded into y past the per-dimension limit */
export const fold = (n: number, limit = 65535): [number, number, number] => {
  if (n <= limit) return [Math.max(n, 1), 1, 1]
  const y = Math.ceil(n / limit)
  return [Math.ceil(n / y), y, 1]
}
