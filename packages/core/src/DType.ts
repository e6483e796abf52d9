/**
 * Element types, with ggml's block layout: a type stores `blockSize` elements in `typeSize` bytes.
 * f32, f16 and i32 have kernels; q8_0 and q4_0 are modelled (sizes, rows) so that graphs, the allocator
 * and buffer sizes are right when their kernels arrive.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export type DType = "f32" | "f16" | "i32" | "q8_0" | "q4_0"

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
  q4_0: { name: "q4_0", blockSize: 32, typeSize: 18, isQuantized: true, isFloat: true }
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const all: ReadonlyArray<DType> = ["f32", "f16", "i32", "q8_0", "q4_0"]

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
 * Types the CPU and GPU kernels compute with today.
 *
 * @since 0.1.0
 * @category getters
 */
export const isComputable = (dtype: DType): boolean => !table[dtype].isQuantized
