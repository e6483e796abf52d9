/**
 * Tensors bound to host memory for the reference kernels: typed views over one buffer, element access
 * through strides (so views, broadcasts and in-place results all work), rows as f64 numbers, and rows of
 * quantized blocks dequantized.
 *
 * @internal
 */
import * as DType from "../../DType.js"
import * as Float16 from "../../Float16.js"
import type { Tensor } from "../../Tensor.js"
import { dequantizeRow } from "../quant.js"

/** @internal: typed views over one host buffer */
export interface Memory {
  readonly f32: Float32Array
  readonly i32: Int32Array
  readonly u16: Uint16Array
  readonly view: DataView
}

const views = new WeakMap<ArrayBufferLike, Memory>()

/** @internal */
export const memoryOf = (bytes: Uint8Array): Memory => {
  let m = views.get(bytes.buffer)
  if (m === undefined) {
    const n = bytes.buffer.byteLength
    m = {
      f32: new Float32Array(bytes.buffer, 0, n >> 2),
      i32: new Int32Array(bytes.buffer, 0, n >> 2),
      u16: new Uint16Array(bytes.buffer, 0, n >> 1),
      view: new DataView(bytes.buffer)
    }
    views.set(bytes.buffer, m)
  }
  return m
}

/** @internal: a tensor bound to memory; `base` is the byte offset of element (0, 0, 0, 0) in the buffer */
export class Acc {
  readonly ne0: number
  readonly ne1: number
  readonly ne2: number
  readonly ne3: number
  readonly nb0: number
  readonly nb1: number
  readonly nb2: number
  readonly nb3: number
  constructor(readonly t: Tensor, readonly mem: Memory, readonly base: number) {
    ;[this.ne0, this.ne1, this.ne2, this.ne3] = t.ne
    ;[this.nb0, this.nb1, this.nb2, this.nb3] = t.nb
  }
  off(i0: number, i1: number, i2: number, i3: number): number {
    return this.base + i0 * this.nb0 + i1 * this.nb1 + i2 * this.nb2 + i3 * this.nb3
  }
  read(off: number): number {
    switch (this.t.dtype) {
      case "f32":
        return this.mem.f32[off >> 2]
      case "f16":
        return Float16.toFloat(this.mem.u16[off >> 1])
      case "i32":
        return this.mem.i32[off >> 2]
      default:
        throw new Error(`cpu: ${this.t.dtype} is read by rows (dequantized), not by elements`)
    }
  }
  write(off: number, v: number): void {
    switch (this.t.dtype) {
      case "f32":
        this.mem.f32[off >> 2] = v
        return
      case "f16":
        this.mem.u16[off >> 1] = Float16.fromFloat(v)
        return
      case "i32":
        this.mem.i32[off >> 2] = v
        return
      default:
        throw new Error(`cpu: ${this.t.dtype} is written by rows (quantized), not by elements`)
    }
  }
  get(i0: number, i1: number, i2: number, i3: number): number {
    return this.read(this.off(i0, i1, i2, i3))
  }
  set(i0: number, i1: number, i2: number, i3: number, v: number): void {
    this.write(this.off(i0, i1, i2, i3), v)
  }
  /** row (i1, i2, i3) as numbers: quantized rows dequantized */
  row(i1: number, i2: number, i3: number, out: Float64Array = new Float64Array(this.ne0)): Float64Array {
    const o = this.off(0, i1, i2, i3)
    if (DType.isQuantized(this.t.dtype)) {
      dequantizeRow(this.t.dtype, this.mem.view, o, this.ne0, out)
      return out
    }
    for (let i = 0; i < this.ne0; i++) out[i] = this.read(o + i * this.nb0)
    return out
  }
  /** the raw bytes of row (i1, i2, i3) of a contiguous-row tensor */
  rowBytes(i1: number, i2: number, i3: number): Uint8Array {
    const o = this.off(0, i1, i2, i3)
    return new Uint8Array(this.mem.view.buffer, o, DType.rowSize(this.t.dtype, this.ne0))
  }
}

/** @internal: visits every index of `a` in ggml order */
export const each = (a: Acc, f: (i0: number, i1: number, i2: number, i3: number) => void): void => {
  for (let i3 = 0; i3 < a.ne3; i3++) {
    for (let i2 = 0; i2 < a.ne2; i2++) {
      for (let i1 = 0; i1 < a.ne1; i1++) {
        for (let i0 = 0; i0 < a.ne0; i0++) f(i0, i1, i2, i3)
      }
    }
  }
}

/** @internal: visits every row (i1, i2, i3) of `a` */
export const eachRow = (a: Acc, f: (i1: number, i2: number, i3: number) => void): void => {
  for (let i3 = 0; i3 < a.ne3; i3++) {
    for (let i2 = 0; i2 < a.ne2; i2++) {
      for (let i1 = 0; i1 < a.ne1; i1++) f(i1, i2, i3)
    }
  }
}

/** @internal: ggml's ALiBi slope of head `head` of `nHead` (1 without max_bias) */
export const alibiSlope = (maxBias: number, head: number, nHead: number): number => {
  if (maxBias <= 0) return 1
  const nHeadLog2 = 2 ** Math.floor(Math.log2(nHead))
  const m0 = 2 ** (-maxBias / nHeadLog2)
  const m1 = 2 ** (-(maxBias / 2) / nHeadLog2)
  return head < nHeadLog2 ? m0 ** (head + 1) : m1 ** (2 * (head - nHeadLog2) + 1)
}
