/**
 * Seeded random data and shapes, so a failing case reproduces from its seed: plain generators for
 * kernels and fast-check arbitraries for property tests.
 *
 * @since 0.1.0
 */
import * as fc from "fast-check"

/**
 * A deterministic uniform generator in [0, 1) (mulberry32).
 *
 * @since 0.1.0
 * @category constructors
 */
export const prng = (seed: number): () => number => {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ValueOptions {
  /** only positive values (sqrt, log, divisors) */
  readonly positive?: boolean
  /** the magnitude range, default [0.05, 1]: never zero */
  readonly min?: number
  readonly max?: number
}

/**
 * `n` non-zero values in ±[min, max].
 *
 * @since 0.1.0
 * @category constructors
 */
export const values = (seed: number, n: number, options?: ValueOptions): Float32Array => {
  const next = prng(seed)
  const lo = options?.min ?? 0.05
  const hi = options?.max ?? 1
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) {
    const v = lo + (hi - lo) * next()
    out[i] = options?.positive || next() < 0.5 ? v : -v
  }
  return out
}

/**
 * `n` integers in [0, bound).
 *
 * @since 0.1.0
 * @category constructors
 */
export const indices = (seed: number, n: number, bound: number): Int32Array => {
  const next = prng(seed)
  return Int32Array.from({ length: n }, () => Math.floor(next() * bound))
}

/**
 * A fast-check arbitrary of 4-D shapes with odd sizes, within an element budget.
 *
 * @since 0.1.0
 * @category arbitraries
 */
export const shape = (options?: { readonly maxElements?: number; readonly maxDim?: number }) => {
  const maxDim = options?.maxDim ?? 37
  const budget = options?.maxElements ?? 4096
  return fc.tuple(
    fc.integer({ min: 1, max: maxDim }),
    fc.integer({ min: 1, max: 9 }),
    fc.integer({ min: 1, max: 4 }),
    fc.integer({ min: 1, max: 3 })
  ).filter(([a, b, c, d]) => a * b * c * d <= budget)
}

/**
 * A fast-check arbitrary of non-zero f32 data for a shape.
 *
 * @since 0.1.0
 * @category arbitraries
 */
export const tensorData = (n: number, options?: ValueOptions) => fc.integer().map((seed) => values(seed, n, options))
