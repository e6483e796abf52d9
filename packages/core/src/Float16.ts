/**
 * IEEE 754 half precision, as ggml stores f16: conversion both ways with round-to-nearest-even.
 *
 * @since 0.1.0
 */

const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)

/**
 * The f16 bit pattern nearest to `value` (ties to even), overflow to infinity, NaN kept.
 *
 * @since 0.1.0
 * @category conversions
 */
export const fromFloat = (value: number): number => {
  f32[0] = value
  const x = u32[0]
  const sign = (x >>> 16) & 0x8000
  const exp = (x >>> 23) & 0xff
  let mant = x & 0x7fffff
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0)
  let e = exp - 127 + 15
  if (e >= 0x1f) return sign | 0x7c00
  if (e <= 0) {
    if (e < -10) return sign
    mant |= 0x800000
    const shift = 14 - e
    const half = 1 << (shift - 1)
    let m = mant >>> shift
    const rest = mant & ((1 << shift) - 1)
    if (rest > half || (rest === half && (m & 1) === 1)) m++
    return sign | m
  }
  let m = mant >>> 13
  const rest = mant & 0x1fff
  if (rest > 0x1000 || (rest === 0x1000 && (m & 1) === 1)) {
    m++
    if (m === 0x400) {
      m = 0
      e++
      if (e >= 0x1f) return sign | 0x7c00
    }
  }
  return sign | (e << 10) | m
}

const decode = (h: number): number => {
  const sign = h & 0x8000 ? -1 : 1
  const exp = (h >>> 10) & 0x1f
  const mant = h & 0x3ff
  if (exp === 0) return sign * mant * 2 ** -24
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN
  return sign * (1 + mant / 1024) * 2 ** (exp - 15)
}

/** every half decoded once: a lookup is faster than arithmetic in the CPU kernels */
const table = (() => {
  const t = new Float32Array(65536)
  for (let i = 0; i < 65536; i++) t[i] = decode(i)
  return t
})()

/**
 * @since 0.1.0
 * @category conversions
 */
export const toFloat = (bits: number): number => table[bits & 0xffff]

/**
 * Rounds a number to the nearest f16 value.
 *
 * @since 0.1.0
 * @category conversions
 */
export const round = (value: number): number => table[fromFloat(value)]

/**
 * @since 0.1.0
 * @category conversions
 */
export const encodeArray = (values: ArrayLike<number>): Uint16Array => {
  const out = new Uint16Array(values.length)
  for (let i = 0; i < values.length; i++) out[i] = fromFloat(values[i])
  return out
}

/**
 * @since 0.1.0
 * @category conversions
 */
export const decodeArray = (bits: ArrayLike<number>): Float32Array => {
  const out = new Float32Array(bits.length)
  for (let i = 0; i < bits.length; i++) out[i] = table[bits[i] & 0xffff]
  return out
}
