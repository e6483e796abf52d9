/**
 * Moving tensor data between host arrays and the bytes a buffer holds: encoding to the tensor's dtype,
 * decoding back, and gathering a strided view into a dense array.
 *
 * @since 0.1.0
 */
import type * as DType from "./DType.js"
import * as Float16 from "./Float16.js"
import * as Tensor from "./Tensor.js"

/**
 * What `get` returns: f32 and f16 tensors decode to Float32Array, i32 to Int32Array.
 *
 * @since 0.1.0
 * @category models
 */
export type HostArray = Float32Array | Int32Array

/**
 * What `set` takes: numbers (converted to the tensor's dtype), or raw bytes of that dtype.
 *
 * @since 0.1.0
 * @category models
 */
export type HostData = ArrayLike<number> | Float32Array | Int32Array | Uint16Array | Uint8Array

/**
 * Bytes of `data` in `dtype`. A Uint8Array is taken as raw bytes, a Uint16Array as f16 bits.
 *
 * @since 0.1.0
 * @category conversions
 */
export const encode = (dtype: DType.DType, data: HostData): Uint8Array => {
  if (data instanceof Uint8Array) return data
  switch (dtype) {
    case "f32": {
      const out = data instanceof Float32Array ? data : Float32Array.from(data as ArrayLike<number>)
      return new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
    }
    case "f16": {
      const out = data instanceof Uint16Array ? data : Float16.encodeArray(data as ArrayLike<number>)
      return new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
    }
    case "i32": {
      const out = data instanceof Int32Array ? data : Int32Array.from(data as ArrayLike<number>)
      return new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
    }
    default:
      throw new Error(`encode: ${dtype} data must be given as raw bytes (Uint8Array)`)
  }
}

/**
 * Elements a host array must have to fill a tensor (bytes for raw data).
 *
 * @since 0.1.0
 * @category getters
 */
export const expectedLength = (t: Tensor.Tensor, data: HostData): number =>
  data instanceof Uint8Array ? Tensor.nbytes(t) : Tensor.nelements(t)

/**
 * Reads element (i0..i3) of `t` from `bytes`, where `bytes` starts at the tensor's memory owner.
 *
 * @since 0.1.0
 * @category conversions
 */
export const gather = (t: Tensor.Tensor, bytes: Uint8Array, ownerOffset: number): HostArray => {
  const n = Tensor.nelements(t)
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out = t.dtype === "i32" ? new Int32Array(n) : new Float32Array(n)
  let k = 0
  for (let i3 = 0; i3 < t.ne[3]; i3++) {
    for (let i2 = 0; i2 < t.ne[2]; i2++) {
      for (let i1 = 0; i1 < t.ne[1]; i1++) {
        for (let i0 = 0; i0 < t.ne[0]; i0++) {
          const off = Tensor.byteOffset(t, i0, i1, i2, i3) - ownerOffset
          out[k++] = t.dtype === "f32"
            ? dv.getFloat32(off, true)
            : t.dtype === "f16"
            ? Float16.toFloat(dv.getUint16(off, true))
            : dv.getInt32(off, true)
        }
      }
    }
  }
  return out
}

/**
 * Decodes the bytes of a contiguous tensor.
 *
 * @since 0.1.0
 * @category conversions
 */
export const decode = (dtype: DType.DType, bytes: Uint8Array): HostArray => {
  const copy = bytes.slice()
  switch (dtype) {
    case "f32":
      return new Float32Array(copy.buffer, 0, copy.byteLength / 4)
    case "f16":
      return Float16.decodeArray(new Uint16Array(copy.buffer, 0, copy.byteLength / 2))
    case "i32":
      return new Int32Array(copy.buffer, 0, copy.byteLength / 4)
    default:
      throw new Error(`decode: ${dtype} has no host decoding yet`)
  }
}
