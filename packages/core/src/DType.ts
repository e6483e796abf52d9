/**
 * Element types, with ggml's block layout: a type stores `blockSize` elements in `typeSize` bytes. f32, f16
 * and i32 hold values; q8_0, q4_0, q4_1, q5_0 (blocks of 32) and q4_K, q6_K (super-blocks of 256) hold
 * ggml's quantized blocks, byte for byte (`Quant` makes and reads them).
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export type DType = "f32" | "f16" | "i32" | Quantized

/**
 * ggml's quantized block types.
 *
 * @since 0.1.0
 * @category models
 */
export type Quantized = "q8_0" | "q4_0" | "q4_1" | "q5_0" | "q4_K" | "q6_K"

/**
 * @since 0.1.0
 * @category models
 */
export interface Traits {
  readonly name: DType
  /** elements per block (1 for plain types) */
  readonly blockSize: number
  /** bytes per block */
  readonly typeSize: number
  readonly isQuantized: boolean
  readonly isFloat: boolean
}

const table: Record<DType, Traits> = {
  f32: { name: "f32", blockSize: 1, typeSize: 4, isQuantized: false, isFloat: true },
  f16: { name: "f16", blockSize: 1, typeSize: 2, isQuantized: false, isFloat: true },
  i32: { name: "i32", blockSize: 1, typeSize: 4, isQuantized: false, isFloat: false },
  // {f16 d; i8 qs[32]}
  q8_0: { name: "q8_0", blockSize: 32, typeSize: 34, isQuantized: true, isFloat: true },
  // {f16 d; u8 qs[16]}
  q4_0: { name: "q4_0", blockSize: 32, typeSize: 18, isQuantized: true, isFloat: true },
  // {f16 d; f16 m; u8 qs[16]}
  q4_1: { name: "q4_1", blockSize: 32, typeSize: 20, isQuantized: true, isFloat: true },
  // {f16 d; u8 qh[4]; u8 qs[16]}
  q5_0: { name: "q5_0", blockSize: 32, typeSize: 22, isQuantized: true, isFloat: true },
  // {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}
  q4_K: { name: "q4_K", blockSize: 256, typeSize: 144, isQuantized: true, isFloat: true },
  // {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}
  q6_K: { name: "q6_K", blockSize: 256, typeSize: 210, isQuantized: true, isFloat: true }
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const all: ReadonlyArray<DType> = ["f32", "f16", "i32", "q8_0", "q4_0", "q4_1", "q5_0", "q4_K", "q6_K"]

/**
 * @since 0.1.0
 * @category constructors
 */
export const quantized: ReadonlyArray<Quantized> = ["q8_0", "q4_0", "q4_1", "q5_0", "q4_K", "q6_K"]

/**
 * @since 0.1.0
 * @category refinements
 */
export const isQuantized = (dtype: DType): dtype is Quantized => table[dtype].isQuantized

/**
 * @since 0.1.0
 * @category refinements
 */
export const isDType = (u: unknown): u is DType => typeof u === "string" && u in table

/**
 * @since 0.1.0
 * @category getters
 */
export const traits = (dtype: DType): Traits => table[dtype]

/**
 * @since 0.1.0
 * @category getters
 */
export const blockSize = (dtype: DType): number => table[dtype].blockSize

/**
 * @since 0.1.0
 * @category getters
 */
export const typeSize = (dtype: DType): number => table[dtype].typeSize

/**
 * Bytes of a row of `ne0` elements; `ne0` must be a multiple of the block size.
 *
 * @since 0.1.0
 * @category getters
 */
export const rowSize = (dtype: DType, ne0: number): number => (table[dtype].typeSize * ne0) / table[dtype].blockSize

/**
 * Types that hold plain values (f32, f16, i32): every op computes with them; quantized types are read
 * by the ops that take weights (mul_mat, get_rows, cpy, mul_mat_id).
 *
 * @since 0.1.0
 * @category getters
 */
export const isComputable = (dtype: DType): boolean => !table[dtype].isQuantized
