/**
 * The reference kernels: every op in plain TypeScript, accumulating in f64 (JS numbers) where ggml
 * accumulates in ggml_float. Tensors are read and written through their strides, so views,
 * broadcasting and in-place results (dst over a source of the same layout) all work.
 *
 * @internal
 */
import * as Float16 from "../Float16.js"
import type { GluKind, Op, UnaryKind } from "../Op.js"
import type { Tensor } from "../Tensor.js"

/** @internal: typed views over one host buffer */
export interface Memory {
  readonly f32: Float32Array
  readonly i32: Int32Array
  readonly u16: Uint16Array
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
      u16: new Uint16Array(bytes.buffer, 0, n >> 1)
    }
    views.set(bytes.buffer, m)
  }
  return m
}

/** A tensor bound to memory: `base` is the byte offset of element (0, 0, 0, 0) in the ArrayBuffer. */
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
        throw new Error(`cpu: ${this.t.dtype} has no kernels`)
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
        throw new Error(`cpu: ${this.t.dtype} has no kernels`)
    }
  }
  get(i0: number, i1: number, i2: number, i3: number): number {
    return this.read(this.off(i0, i1, i2, i3))
  }
  set(i0: number, i1: number, i2: number, i3: number, v: number): void {
    this.write(this.off(i0, i1, i2, i3), v)
  }
  /** row (i1, i2, i3) as numbers */
  row(i1: number, i2: number, i3: number, out: Float64Array = new Float64Array(this.ne0)): Float64Array {
    const o = this.off(0, i1, i2, i3)
    for (let i = 0; i < this.ne0; i++) out[i] = this.read(o + i * this.nb0)
    return out
  }
}

/** Visits every index of `t` in ggml order. */
const each = (a: Acc, f: (i0: number, i1: number, i2: number, i3: number) => void) => {
  for (let i3 = 0; i3 < a.ne3; i3++) {
    for (let i2 = 0; i2 < a.ne2; i2++) {
      for (let i1 = 0; i1 < a.ne1; i1++) {
        for (let i0 = 0; i0 < a.ne0; i0++) f(i0, i1, i2, i3)
      }
    }
  }
}

const SQRT_2_OVER_PI = 0.7978845608028654
const GELU_COEF_A = 0.044715
const GELU_QUICK_COEF = -1.702

/** @internal */
export const gelu = (x: number): number => 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * x * (1 + GELU_COEF_A * x * x)))

/** @internal */
export const unaryFn = (kind: UnaryKind): (x: number) => number => {
  switch (kind) {
    case "relu":
      return (x) => (x > 0 ? x : 0)
    case "gelu":
      return gelu
    case "gelu_quick":
      return (x) => x * (1 / (1 + Math.exp(GELU_QUICK_COEF * x)))
    case "silu":
      return (x) => x / (1 + Math.exp(-x))
    case "tanh":
      return Math.tanh
    case "sigmoid":
      return (x) => 1 / (1 + Math.exp(-x))
    case "neg":
      return (x) => -x
    case "abs":
      return Math.abs
  }
}

const gluAct = (kind: GluKind) => (kind === "swiglu" ? unaryFn("silu") : gelu)

const binaryFn = (tag: "Add" | "Sub" | "Mul" | "Div"): (a: number, b: number) => number => {
  switch (tag) {
    case "Add":
      return (a, b) => a + b
    case "Sub":
      return (a, b) => a - b
    case "Mul":
      return (a, b) => a * b
    case "Div":
      return (a, b) => a / b
  }
}

const map = (dst: Acc, src: Acc, f: (x: number) => number) =>
  each(dst, (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, f(src.get(i0, i1, i2, i3))))

const binary = (dst: Acc, a: Acc, b: Acc, f: (x: number, y: number) => number) =>
  each(
    dst,
    (i0, i1, i2, i3) =>
      dst.set(i0, i1, i2, i3, f(a.get(i0, i1, i2, i3), b.get(i0 % b.ne0, i1 % b.ne1, i2 % b.ne2, i3 % b.ne3)))
  )

const eachRow = (a: Acc, f: (i1: number, i2: number, i3: number) => void) => {
  for (let i3 = 0; i3 < a.ne3; i3++) {
    for (let i2 = 0; i2 < a.ne2; i2++) {
      for (let i1 = 0; i1 < a.ne1; i1++) f(i1, i2, i3)
    }
  }
}

const rmsNormRows = (dst: Acc, a: Acc, eps: number) =>
  eachRow(a, (i1, i2, i3) => {
    const x = a.row(i1, i2, i3)
    let s = 0
    for (let i = 0; i < x.length; i++) s += x[i] * x[i]
    const scale = 1 / Math.sqrt(s / x.length + eps)
    for (let i = 0; i < x.length; i++) dst.set(i, i1, i2, i3, x[i] * scale)
  })

const mulMat = (dst: Acc, a: Acc, b: Acc) => {
  const K = a.ne0
  // ggml converts src1 to src0's dot type: for f16 weights, activations are rounded to f16 first
  const roundB = a.t.dtype === "f16" ? Float16.round : (x: number) => x
  const r2 = b.ne2 / a.ne2
  const r3 = b.ne3 / a.ne3
  const arow = new Float64Array(K)
  const bcol = new Float64Array(K)
  for (let i3 = 0; i3 < dst.ne3; i3++) {
    for (let i2 = 0; i2 < dst.ne2; i2++) {
      const a2 = Math.floor(i2 / r2)
      const a3 = Math.floor(i3 / r3)
      for (let j = 0; j < dst.ne1; j++) {
        b.row(j, i2, i3, bcol)
        for (let k = 0; k < K; k++) bcol[k] = roundB(bcol[k])
        for (let i = 0; i < dst.ne0; i++) {
          a.row(i, a2, a3, arow)
          let s = 0
          for (let k = 0; k < K; k++) s += arow[k] * bcol[k]
          dst.set(i, j, i2, i3, s)
        }
      }
    }
  }
}

const alibiSlope = (maxBias: number, head: number, nHead: number): number => {
  if (maxBias <= 0) return 1
  const nHeadLog2 = 2 ** Math.floor(Math.log2(nHead))
  const m0 = 2 ** (-maxBias / nHeadLog2)
  const m1 = 2 ** (-(maxBias / 2) / nHeadLog2)
  return head < nHeadLog2 ? m0 ** (head + 1) : m1 ** (2 * (head - nHeadLog2) + 1)
}

/** @internal: runs one node; `acc` binds a tensor to memory */
export const run = (node: Tensor, acc: (t: Tensor) => Acc): void => {
  const op: Op = node.op
  const dst = acc(node)
  const src = (i: number) => acc(node.src[i])
  switch (op._tag) {
    case "None":
    case "View":
    case "Reshape":
    case "Permute":
    case "Transpose":
      return
    case "Add":
    case "Sub":
    case "Mul":
    case "Div":
      return binary(dst, src(0), src(1), binaryFn(op._tag))
    case "Scale":
      return map(dst, src(0), (x) => x * op.s)
    case "Sqr":
      return map(dst, src(0), (x) => x * x)
    case "Sqrt":
      return map(dst, src(0), Math.sqrt)
    case "Exp":
      return map(dst, src(0), Math.exp)
    case "Log":
      return map(dst, src(0), Math.log)
    case "Unary":
      return map(dst, src(0), unaryFn(op.kind))
    case "Clamp":
      return map(dst, src(0), (x) => (x < op.min ? op.min : x > op.max ? op.max : x))
    case "Cpy":
    case "Cont":
      return map(dst, src(0), (x) => x)
    case "MulMat":
      return mulMat(dst, src(0), src(1))
    case "MulMatAdd": {
      mulMat(dst, src(0), src(1))
      return binary(dst, dst, src(2), (x, y) => x + y)
    }
    case "SoftMax": {
      const a = src(0)
      const mask = node.src.length > 1 ? src(1) : undefined
      const w = new Float64Array(a.ne0)
      return eachRow(a, (i1, i2, i3) => {
        const slope = alibiSlope(op.maxBias, i2, a.ne2)
        let max = -Infinity
        for (let i = 0; i < a.ne0; i++) {
          let v = a.get(i, i1, i2, i3) * op.scale
          if (mask) v += slope * mask.get(i, i1, i2 % mask.ne2, i3 % mask.ne3)
          w[i] = v
          if (v > max) max = v
        }
        let sum = 0
        for (let i = 0; i < a.ne0; i++) {
          w[i] = Math.exp(w[i] - max)
          sum += w[i]
        }
        for (let i = 0; i < a.ne0; i++) dst.set(i, i1, i2, i3, w[i] / sum)
      })
    }
    case "RmsNorm":
      return rmsNormRows(dst, src(0), op.eps)
    case "RmsNormMul": {
      rmsNormRows(dst, src(0), op.eps)
      return binary(dst, dst, src(1), (x, y) => x * y)
    }
    case "AddRmsNorm": {
      binary(dst, src(0), src(1), (x, y) => x + y)
      rmsNormRows(dst, dst, op.eps)
      return op.withMul ? binary(dst, dst, src(2), (x, y) => x * y) : undefined
    }
    case "Norm": {
      const a = src(0)
      return eachRow(a, (i1, i2, i3) => {
        const x = a.row(i1, i2, i3)
        let mean = 0
        for (let i = 0; i < x.length; i++) mean += x[i]
        mean /= x.length
        let v = 0
        for (let i = 0; i < x.length; i++) v += (x[i] - mean) * (x[i] - mean)
        const scale = 1 / Math.sqrt(v / x.length + op.eps)
        for (let i = 0; i < x.length; i++) dst.set(i, i1, i2, i3, (x[i] - mean) * scale)
      })
    }
    case "Rope": {
      const a = src(0)
      const pos = src(1)
      const half = op.nDims / 2
      return eachRow(a, (i1, i2, i3) => {
        const p = pos.get(i2, 0, 0, 0)
        const x = a.row(i1, i2, i3)
        for (let i = 0; i < half; i++) {
          const theta = p * op.freqScale * op.freqBase ** ((-2 * i) / op.nDims)
          const c = Math.cos(theta)
          const s = Math.sin(theta)
          const [j0, j1] = op.mode === 0 ? [2 * i, 2 * i + 1] : [i, i + half]
          dst.set(j0, i1, i2, i3, x[j0] * c - x[j1] * s)
          dst.set(j1, i1, i2, i3, x[j0] * s + x[j1] * c)
        }
        for (let i = op.nDims; i < a.ne0; i++) dst.set(i, i1, i2, i3, x[i])
      })
    }
    case "GetRows": {
      const a = src(0)
      const idx = src(1)
      // an index outside the table (computed on the device: the host's are checked at set) reads zeros,
      // as on every backend
      return eachRow(dst, (i1, i2, i3) => {
        const r = idx.get(i1, i2, i3, 0)
        const inside = r >= 0 && r < a.ne1
        for (let i = 0; i < dst.ne0; i++) dst.set(i, i1, i2, i3, inside ? a.get(i, r, i2, i3) : 0)
      })
    }
    case "SetRows": {
      const s = src(1)
      const idx = src(2)
      // a row written outside the destination is dropped, as on every backend
      return eachRow(s, (i1, i2, i3) => {
        const r = idx.get(i1, i2 % idx.ne1, i3 % idx.ne2, 0)
        if (r < 0 || r >= dst.ne1) return
        for (let i = 0; i < s.ne0; i++) dst.set(i, r, i2, i3, s.get(i, i1, i2, i3))
      })
    }
    case "SumRows":
    case "Mean": {
      const a = src(0)
      return eachRow(a, (i1, i2, i3) => {
        let s = 0
        for (let i = 0; i < a.ne0; i++) s += a.get(i, i1, i2, i3)
        dst.set(0, i1, i2, i3, op._tag === "Mean" ? s / a.ne0 : s)
      })
    }
    case "Sum": {
      const a = src(0)
      let s = 0
      each(a, (i0, i1, i2, i3) => {
        s += a.get(i0, i1, i2, i3)
      })
      return dst.set(0, 0, 0, 0, s)
    }
    case "Cumsum": {
      const a = src(0)
      return eachRow(a, (i1, i2, i3) => {
        let s = 0
        for (let i = 0; i < a.ne0; i++) {
          s += a.get(i, i1, i2, i3)
          dst.set(i, i1, i2, i3, s)
        }
      })
    }
    case "Argmax": {
      const a = src(0)
      for (let i1 = 0; i1 < a.ne1; i1++) {
        let best = 0
        let max = -Infinity
        for (let i = 0; i < a.ne0; i++) {
          const v = a.get(i, i1, 0, 0)
          if (v > max) {
            max = v
            best = i
          }
        }
        dst.set(i1, 0, 0, 0, best)
      }
      return
    }
    case "Argsort":
    case "TopK": {
      const a = src(0)
      const desc = op._tag === "TopK" || op.order === "desc"
      return eachRow(a, (i1, i2, i3) => {
        const x = a.row(i1, i2, i3)
        const order = Array.from({ length: a.ne0 }, (_, i) => i)
        order.sort((p, q) => (desc ? x[q] - x[p] : x[p] - x[q]) || p - q)
        for (let i = 0; i < dst.ne0; i++) dst.set(i, i1, i2, i3, order[i])
      })
    }
    case "Concat": {
      const a = src(0)
      const b = src(1)
      const d = op.dim
      return each(dst, (i0, i1, i2, i3) => {
        const i = [i0, i1, i2, i3]
        if (i[d] < a.t.ne[d]) return dst.set(i0, i1, i2, i3, a.get(i0, i1, i2, i3))
        i[d] -= a.t.ne[d]
        dst.set(i0, i1, i2, i3, b.get(i[0], i[1], i[2], i[3]))
      })
    }
    case "Glu": {
      const act = gluAct(op.kind)
      if (node.src.length > 1) {
        const a = src(0)
        const g = src(1)
        const [x, y] = op.swapped ? [g, a] : [a, g]
        return each(
          dst,
          (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, act(x.get(i0, i1, i2, i3)) * y.get(i0, i1, i2, i3))
        )
      }
      const a = src(0)
      const n = dst.ne0
      const [ox, oy] = op.swapped ? [n, 0] : [0, n]
      return each(
        dst,
        (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, act(a.get(i0 + ox, i1, i2, i3)) * a.get(i0 + oy, i1, i2, i3))
      )
    }
    case "DiagMaskInf": {
      const a = src(0)
      return each(
        dst,
        (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, i0 > op.nPast + i1 ? -Infinity : a.get(i0, i1, i2, i3))
      )
    }
    case "Pad": {
      const a = src(0)
      return each(dst, (i0, i1, i2, i3) =>
        dst.set(
          i0,
          i1,
          i2,
          i3,
          i0 < a.ne0 && i1 < a.ne1 && i2 < a.ne2 && i3 < a.ne3 ? a.get(i0, i1, i2, i3) : 0
        ))
    }
    case "Repeat": {
      const a = src(0)
      return each(
        dst,
        (i0, i1, i2, i3) => dst.set(i0, i1, i2, i3, a.get(i0 % a.ne0, i1 % a.ne1, i2 % a.ne2, i3 % a.ne3))
      )
    }
  }
}
