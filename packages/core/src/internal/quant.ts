/**
 * ggml's block formats: the reference quantizers (as ggml's `quantize_row_*_ref` compute them, in f32
 * arithmetic step by step, so the bytes are the same) and the dequantizers.
 *
 * @internal
 */
import type { Quantized } from "../DType.js"
import * as Float16 from "../Float16.js"

const f = Math.fround

/** ggml's nearest_int: round half to even through the f32 magic number 1.5 * 2^23 */
export const nearestInt = (x: number): number => f(f(x) + 12582912) - 12582912

/** C's (int8_t) / (int) cast of a float: toward zero */
const trunc = (x: number): number => (x < 0 ? Math.ceil(x) : Math.floor(x))

/** C's roundf: half away from zero */
const roundAway = (x: number): number => (x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5))

const half = (x: number): number => Float16.fromFloat(f(x))
const fromHalf = (view: DataView, at: number): number => Float16.toFloat(view.getUint16(at, true))

const GROUP_MAX_EPS = f(1e-15)

/** the block layouts: values per block, bytes per block */
const LAYOUT: Record<Quantized, { readonly values: number; readonly bytes: number }> = {
  q8_0: { values: 32, bytes: 34 },
  q4_0: { values: 32, bytes: 18 },
  q4_1: { values: 32, bytes: 20 },
  q5_0: { values: 32, bytes: 22 },
  q4_K: { values: 256, bytes: 144 },
  q6_K: { values: 256, bytes: 210 }
}

type Quantizer = (x: Float32Array, at: number, out: DataView, o: number) => void
type Dequantizer = (view: DataView, o: number, y: Float32Array, at: number) => void

const q8_0: Quantizer = (x, at, out, o) => {
  let amax = 0
  for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[at + j]))
  const d = f(amax / 127)
  const id = d ? f(1 / d) : 0
  out.setUint16(o, half(d), true)
  for (let j = 0; j < 32; j++) out.setInt8(o + 2 + j, roundAway(f(x[at + j] * id)))
}

/** the value with the largest magnitude (the first of equals), as q4_0 and q5_0 scale by it */
const signedMax = (x: Float32Array, at: number) => {
  let amax = 0
  let max = 0
  for (let j = 0; j < 32; j++) {
    const v = x[at + j]
    if (amax < Math.abs(v)) {
      amax = Math.abs(v)
      max = v
    }
  }
  return max
}

const q4_0: Quantizer = (x, at, out, o) => {
  const d = f(signedMax(x, at) / -8)
  const id = d ? f(1 / d) : 0
  out.setUint16(o, half(d), true)
  for (let j = 0; j < 16; j++) {
    const x0 = Math.min(15, trunc(f(f(x[at + j] * id) + 8.5)))
    const x1 = Math.min(15, trunc(f(f(x[at + 16 + j] * id) + 8.5)))
    out.setUint8(o + 2 + j, x0 | (x1 << 4))
  }
}

const q4_1: Quantizer = (x, at, out, o) => {
  let min = Infinity
  let max = -Infinity
  for (let j = 0; j < 32; j++) {
    min = Math.min(min, x[at + j])
    max = Math.max(max, x[at + j])
  }
  const d = f(f(max - min) / 15)
  const id = d ? f(1 / d) : 0
  out.setUint16(o, half(d), true)
  out.setUint16(o + 2, half(min), true)
  for (let j = 0; j < 16; j++) {
    const x0 = Math.min(15, trunc(f(f(f(x[at + j] - min) * id) + 0.5)))
    const x1 = Math.min(15, trunc(f(f(f(x[at + 16 + j] - min) * id) + 0.5)))
    out.setUint8(o + 4 + j, x0 | (x1 << 4))
  }
}

const q5_0: Quantizer = (x, at, out, o) => {
  const d = f(signedMax(x, at) / -16)
  const id = d ? f(1 / d) : 0
  out.setUint16(o, half(d), true)
  let qh = 0
  for (let j = 0; j < 16; j++) {
    const x0 = Math.min(31, trunc(f(f(x[at + j] * id) + 16.5)))
    const x1 = Math.min(31, trunc(f(f(x[at + 16 + j] * id) + 16.5)))
    out.setUint8(o + 6 + j, (x0 & 15) | ((x1 & 15) << 4))
    qh |= ((x0 & 0x10) >> 4) << j
    qh |= ((x1 & 0x10) >> 4) << (j + 16)
  }
  out.setUint32(o + 2, qh >>> 0, true)
}

/**
 * ggml's make_qkx2_quants: a scale and a min for n values in [0, nmax] levels, searching nstep + 1
 * candidate scales for the least weighted error; the levels land in L
 */
const makeQkx2 = (
  n: number,
  nmax: number,
  x: Float32Array,
  at: number,
  weights: Float32Array,
  L: Uint8Array,
  lAt: number,
  rmin: number,
  rdelta: number,
  nstep: number
): { readonly scale: number; readonly min: number } => {
  const Laux = new Uint8Array(n)
  let min = x[at]
  let max = x[at]
  let sumW = weights[0]
  let sumX = f(sumW * x[at])
  for (let i = 1; i < n; i++) {
    if (x[at + i] < min) min = x[at + i]
    if (x[at + i] > max) max = x[at + i]
    const w = weights[i]
    sumW = f(sumW + w)
    sumX = f(sumX + f(w * x[at + i]))
  }
  if (min > 0) min = 0
  if (max === min) {
    for (let i = 0; i < n; i++) L[lAt + i] = 0
    return { scale: 0, min: -min }
  }
  let iscale = f(nmax / f(max - min))
  let scale = f(1 / iscale)
  let bestError = 0
  for (let i = 0; i < n; i++) {
    const l = nearestInt(f(iscale * f(x[at + i] - min)))
    L[lAt + i] = Math.max(0, Math.min(nmax, l))
    const diff = f(f(f(scale * L[lAt + i]) + min) - x[at + i])
    bestError = f(bestError + f(weights[i] * f(diff * diff)))
  }
  if (nstep < 1) return { scale, min: -min }
  for (let is = 0; is <= nstep; is++) {
    iscale = f(f(f(rmin + f(rdelta * is)) + nmax) / f(max - min))
    let sumL = 0
    let sumL2 = 0
    let sumXL = 0
    for (let i = 0; i < n; i++) {
      const l = Math.max(0, Math.min(nmax, nearestInt(f(iscale * f(x[at + i] - min)))))
      Laux[i] = l
      const w = weights[i]
      sumL = f(sumL + f(w * l))
      sumL2 = f(sumL2 + f(f(w * l) * l))
      sumXL = f(sumXL + f(f(w * l) * x[at + i]))
    }
    const D = f(f(sumW * sumL2) - f(sumL * sumL))
    if (D > 0) {
      let thisScale = f(f(f(sumW * sumXL) - f(sumX * sumL)) / D)
      let thisMin = f(f(f(sumL2 * sumX) - f(sumL * sumXL)) / D)
      if (thisMin > 0) {
        thisMin = 0
        thisScale = f(sumXL / sumL2)
      }
      let curError = 0
      for (let i = 0; i < n; i++) {
        const diff = f(f(f(thisScale * Laux[i]) + thisMin) - x[at + i])
        curError = f(curError + f(weights[i] * f(diff * diff)))
      }
      if (curError < bestError) {
        for (let i = 0; i < n; i++) L[lAt + i] = Laux[i]
        bestError = curError
        scale = thisScale
        min = thisMin
      }
    }
  }
  return { scale, min: -min }
}

/** q4_K's 6-bit scale and min of sub-block j, from the 12 packed bytes at `o` */
export const scaleMinK4 = (j: number, q: (i: number) => number): readonly [number, number] =>
  j < 4
    ? [q(j) & 63, q(j + 4) & 63]
    : [(q(j + 4) & 0xf) | ((q(j - 4) >> 6) << 4), (q(j + 4) >> 4) | ((q(j) >> 6) << 4)]

const q4_K: Quantizer = (x, at, out, o) => {
  const L = new Uint8Array(256)
  const weights = new Float32Array(32)
  const scales = new Float32Array(8)
  const mins = new Float32Array(8)
  let maxScale = 0
  let maxMin = 0
  for (let j = 0; j < 8; j++) {
    let sumX2 = 0
    for (let l = 0; l < 32; l++) sumX2 = f(sumX2 + f(x[at + 32 * j + l] * x[at + 32 * j + l]))
    const avX = f(Math.sqrt(f(sumX2 / 32)))
    for (let l = 0; l < 32; l++) weights[l] = f(avX + Math.abs(x[at + 32 * j + l]))
    const q = makeQkx2(32, 15, x, at + 32 * j, weights, L, 32 * j, -1, f(0.1), 20)
    scales[j] = q.scale
    mins[j] = q.min
    if (q.scale > maxScale) maxScale = q.scale
    if (q.min > maxMin) maxMin = q.min
  }
  const invScale = maxScale > 0 ? f(63 / maxScale) : 0
  const invMin = maxMin > 0 ? f(63 / maxMin) : 0
  const packed = new Uint8Array(12)
  for (let j = 0; j < 8; j++) {
    const ls = Math.min(63, nearestInt(f(invScale * scales[j])) & 0xff)
    const lm = Math.min(63, nearestInt(f(invMin * mins[j])) & 0xff)
    if (j < 4) {
      packed[j] = ls
      packed[j + 4] = lm
    } else {
      packed[j + 4] = (ls & 0xf) | ((lm & 0xf) << 4)
      packed[j - 4] |= (ls >> 4) << 6
      packed[j] |= (lm >> 4) << 6
    }
  }
  const dBits = half(f(maxScale / 63))
  const dminBits = half(f(maxMin / 63))
  out.setUint16(o, dBits, true)
  out.setUint16(o + 2, dminBits, true)
  for (let i = 0; i < 12; i++) out.setUint8(o + 4 + i, packed[i])
  const d0 = Float16.toFloat(dBits)
  const dmin0 = Float16.toFloat(dminBits)
  for (let j = 0; j < 8; j++) {
    const [sc, m] = scaleMinK4(j, (i) => packed[i])
    const d = f(d0 * sc)
    if (!d) continue
    const dm = f(dmin0 * m)
    for (let ii = 0; ii < 32; ii++) {
      const l = nearestInt(f(f(x[at + 32 * j + ii] + dm) / d))
      L[32 * j + ii] = Math.max(0, Math.min(15, l))
    }
  }
  for (let j = 0, q = 0; j < 256; j += 64, q += 32) {
    for (let l = 0; l < 32; l++) out.setUint8(o + 16 + q + l, L[j + l] | (L[j + l + 32] << 4))
  }
}

/** ggml's make_qx_quants with rmse_type 1 (weights x^2) and no importance: a signed scale, levels in L */
const makeQx = (n: number, nmax: number, x: Float32Array, at: number, L: Int8Array, lAt: number): number => {
  let max = 0
  let amax = 0
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[at + i])
    if (ax > amax) {
      amax = ax
      max = x[at + i]
    }
  }
  if (amax < GROUP_MAX_EPS) {
    for (let i = 0; i < n; i++) L[lAt + i] = 0
    return 0
  }
  const clampL = (l: number) => Math.max(-nmax, Math.min(nmax - 1, l))
  let iscale = f(-nmax / max)
  let sumLX = 0
  let sumL2 = 0
  for (let i = 0; i < n; i++) {
    const l = clampL(nearestInt(f(iscale * x[at + i])))
    L[lAt + i] = l + nmax
    const w = f(x[at + i] * x[at + i])
    sumLX = f(sumLX + f(f(w * x[at + i]) * l))
    sumL2 = f(sumL2 + f(f(w * l) * l))
  }
  let scale = sumL2 ? f(sumLX / sumL2) : 0
  let best = f(scale * sumLX)
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue
    iscale = f(-f(nmax + f(f(0.1) * is)) / max)
    sumLX = 0
    sumL2 = 0
    for (let i = 0; i < n; i++) {
      const l = clampL(nearestInt(f(iscale * x[at + i])))
      const w = f(x[at + i] * x[at + i])
      sumLX = f(sumLX + f(f(w * x[at + i]) * l))
      sumL2 = f(sumL2 + f(f(w * l) * l))
    }
    if (sumL2 > 0 && f(sumLX * sumLX) > f(best * sumL2)) {
      for (let i = 0; i < n; i++) L[lAt + i] = nmax + clampL(nearestInt(f(iscale * x[at + i])))
      scale = f(sumLX / sumL2)
      best = f(scale * sumLX)
    }
  }
  return scale
}

const q6_K: Quantizer = (x, at, out, o) => {
  const L = new Int8Array(256)
  const scales = new Float32Array(16)
  let maxScale = 0
  let maxAbsScale = 0
  for (let ib = 0; ib < 16; ib++) {
    const scale = makeQx(16, 32, x, at + 16 * ib, L, 16 * ib)
    scales[ib] = scale
    if (Math.abs(scale) > maxAbsScale) {
      maxAbsScale = Math.abs(scale)
      maxScale = scale
    }
  }
  if (maxAbsScale < GROUP_MAX_EPS) {
    for (let i = 0; i < 210; i++) out.setUint8(o + i, 0)
    return
  }
  const iscale = f(-128 / maxScale)
  const dBits = half(f(1 / iscale))
  out.setUint16(o + 208, dBits, true)
  const sc = new Int8Array(16)
  for (let ib = 0; ib < 16; ib++) {
    sc[ib] = Math.min(127, nearestInt(f(iscale * scales[ib])))
    out.setInt8(o + 192 + ib, sc[ib])
  }
  const d0 = Float16.toFloat(dBits)
  for (let j = 0; j < 16; j++) {
    const d = f(d0 * sc[j])
    if (!d) continue
    for (let ii = 0; ii < 16; ii++) {
      const l = Math.max(-32, Math.min(31, nearestInt(f(x[at + 16 * j + ii] / d))))
      L[16 * j + ii] = l + 32
    }
  }
  for (let j = 0, ql = 0, qh = 128; j < 256; j += 128, ql += 64, qh += 32) {
    for (let l = 0; l < 32; l++) {
      const q1 = L[j + l] & 0xf
      const q2 = L[j + l + 32] & 0xf
      const q3 = L[j + l + 64] & 0xf
      const q4 = L[j + l + 96] & 0xf
      out.setUint8(o + ql + l, q1 | (q3 << 4))
      out.setUint8(o + ql + l + 32, q2 | (q4 << 4))
      const h = (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
        ((L[j + l + 96] >> 4) << 6)
      out.setUint8(o + qh + l, h)
    }
  }
}

const dq8_0: Dequantizer = (v, o, y, at) => {
  const d = fromHalf(v, o)
  for (let j = 0; j < 32; j++) y[at + j] = f(d * v.getInt8(o + 2 + j))
}

const dq4_0: Dequantizer = (v, o, y, at) => {
  const d = fromHalf(v, o)
  for (let j = 0; j < 16; j++) {
    const q = v.getUint8(o + 2 + j)
    y[at + j] = f(d * ((q & 15) - 8))
    y[at + 16 + j] = f(d * ((q >> 4) - 8))
  }
}

const dq4_1: Dequantizer = (v, o, y, at) => {
  const d = fromHalf(v, o)
  const m = fromHalf(v, o + 2)
  for (let j = 0; j < 16; j++) {
    const q = v.getUint8(o + 4 + j)
    y[at + j] = f(f(d * (q & 15)) + m)
    y[at + 16 + j] = f(f(d * (q >> 4)) + m)
  }
}

const dq5_0: Dequantizer = (v, o, y, at) => {
  const d = fromHalf(v, o)
  const qh = v.getUint32(o + 2, true)
  for (let j = 0; j < 16; j++) {
    const q = v.getUint8(o + 6 + j)
    const h0 = ((qh >>> j) & 1) << 4
    const h1 = ((qh >>> (j + 16)) & 1) << 4
    y[at + j] = f(d * (((q & 15) | h0) - 16))
    y[at + 16 + j] = f(d * (((q >> 4) | h1) - 16))
  }
}

const dq4_K: Dequantizer = (v, o, y, at) => {
  const d = fromHalf(v, o)
  const dmin = fromHalf(v, o + 2)
  const q = (i: number) => v.getUint8(o + 4 + i)
  for (let c = 0; c < 4; c++) {
    const [sc0, m0] = scaleMinK4(2 * c, q)
    const [sc1, m1] = scaleMinK4(2 * c + 1, q)
    const [d0, min0, d1, min1] = [f(d * sc0), f(dmin * m0), f(d * sc1), f(dmin * m1)]
    for (let l = 0; l < 32; l++) {
      const b = v.getUint8(o + 16 + 32 * c + l)
      y[at + 64 * c + l] = f(f(d0 * (b & 15)) - min0)
      y[at + 64 * c + 32 + l] = f(f(d1 * (b >> 4)) - min1)
    }
  }
}

const dq6_K: Dequantizer = (v, o, y, at) => {
  const d = fromHalf(v, o + 208)
  for (let n = 0; n < 2; n++) {
    const L = o + 64 * n
    const H = o + 128 + 32 * n
    const sc = o + 192 + 8 * n
    for (let l = 0; l < 32; l++) {
      const i = l >> 4
      const ql0 = v.getUint8(L + l)
      const ql32 = v.getUint8(L + l + 32)
      const h = v.getUint8(H + l)
      const q1 = ((ql0 & 15) | (((h >> 0) & 3) << 4)) - 32
      const q2 = ((ql32 & 15) | (((h >> 2) & 3) << 4)) - 32
      const q3 = ((ql0 >> 4) | (((h >> 4) & 3) << 4)) - 32
      const q4 = ((ql32 >> 4) | (((h >> 6) & 3) << 4)) - 32
      const base = at + 128 * n
      y[base + l] = f(f(d * v.getInt8(sc + i)) * q1)
      y[base + l + 32] = f(f(d * v.getInt8(sc + i + 2)) * q2)
      y[base + l + 64] = f(f(d * v.getInt8(sc + i + 4)) * q3)
      y[base + l + 96] = f(f(d * v.getInt8(sc + i + 6)) * q4)
    }
  }
}

const QUANTIZE: Record<Quantized, Quantizer> = { q8_0, q4_0, q4_1, q5_0, q4_K, q6_K }
const DEQUANTIZE: Record<Quantized, Dequantizer> = {
  q8_0: dq8_0,
  q4_0: dq4_0,
  q4_1: dq4_1,
  q5_0: dq5_0,
  q4_K: dq4_K,
  q6_K: dq6_K
}

/** @internal: the blocks of `x` (a multiple of the block length) */
export const quantize = (type: Quantized, x: Float32Array): Uint8Array => {
  const { bytes, values } = LAYOUT[type]
  const blocks = x.length / values
  const out = new Uint8Array(blocks * bytes)
  const view = new DataView(out.buffer)
  const q = QUANTIZE[type]
  for (let b = 0; b < blocks; b++) q(x, b * values, view, b * bytes)
  return out
}

/** @internal: the values of whole blocks, starting `offset` bytes into `bytes` */
export const dequantize = (type: Quantized, bytes: Uint8Array, blocks: number, offset = 0): Float32Array => {
  const { bytes: size, values } = LAYOUT[type]
  const y = new Float32Array(blocks * values)
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, blocks * size)
  const dq = DEQUANTIZE[type]
  for (let b = 0; b < blocks; b++) dq(view, b * size, y, b * values)
  return y
}

/** @internal: dequantizes one row of `n` values at byte `o` of `view` into `y` at `at` */
export const dequantizeRow = (
  type: Quantized,
  view: DataView,
  o: number,
  n: number,
  y: Float64Array | Float32Array
) => {
  const { bytes, values } = LAYOUT[type]
  const dq = DEQUANTIZE[type]
  const tmp = y instanceof Float32Array ? y : new Float32Array(n)
  for (let b = 0; b < n / values; b++) dq(view, o + b * bytes, tmp, b * values)
  if (tmp !== y) { for (let i = 0; i < n; i++) y[i] = tmp[i] }
}
