/**
 * Moving tensor data between host arrays and the bytes a buffer holds: encoding to the tensor's dtype,
 * decoding back, and gathering a strided view into a dense array.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as DType from "./DType.js"
import * as Float16 from "./Float16.js"
import * as Tensor from "./Tensor.js"

/**
 * What `get` returns: f32 and f16 tensors decode to Float32Array, i32 to Int32Array, and quantized
 * tensors give their raw blocks (Uint8Array).
 *
 * @since 0.1.0
 * @category models
 */
export type HostArray = Float32Array | Int32Array | Uint8Array

/**
 * What `set` takes: values, converted to the tensor's type (any typed array or array of numbers: a
 * Uint8Array of pixels sets those pixel values). A quantized tensor takes its raw blocks (a Uint8Array
 * of its bytes). Raw bytes of any type go through `setBytes`.
 *
 * @since 0.1.0
 * @category models
 */
export type HostData = ArrayLike<number>

const nameOf = (t: Tensor.Tensor) => t.name || `tensor #${t.id}`

/**
 * The bytes of `data` as values of `t`'s type, or why they cannot be: a wrong count, a non-integer for
 * an i32 tensor, anything but raw blocks for a quantized one.
 *
 * @since 0.1.0
 * @category conversions
 */
export const encode = (t: Tensor.Tensor, data: HostData): Either.Either<Uint8Array, string> => {
  if (DType.traits(t.dtype).isQuantized) {
    return data instanceof Uint8Array && data.byteLength === Tensor.nbytes(t)
      ? Either.right(data)
      : Either.left(
        `${t.dtype} tensor ${nameOf(t)} takes its raw blocks: a Uint8Array of ${Tensor.nbytes(t)} bytes ` +
          "(Quant.quantize makes them from values)"
      )
  }
  const n = Tensor.nelements(t)
  if (data.length !== n) {
    return Either.left(
      `expected ${n} values for ${nameOf(t)}, got ${data.length} (raw bytes of any type go through setBytes)`
    )
  }
  switch (t.dtype) {
    case "f32": {
      const out = data instanceof Float32Array ? data : Float32Array.from(data)
      return Either.right(new Uint8Array(out.buffer, out.byteOffset, out.byteLength))
    }
    case "f16": {
      const out = Float16.encodeArray(data)
      return Either.right(new Uint8Array(out.buffer, out.byteOffset, out.byteLength))
    }
    default: {
      if (!(data instanceof Int32Array)) {
        for (let i = 0; i < n; i++) {
          const v = data[i]
          if (!Number.isInteger(v) || v < -2147483648 || v > 2147483647) {
            return Either.left(`i32 tensor ${nameOf(t)} takes 32-bit integers: value ${v} at index ${i}`)
          }
        }
      }
      const out = data instanceof Int32Array ? data : Int32Array.from(data)
      return Either.right(new Uint8Array(out.buffer, out.byteOffset, out.byteLength))
    }
  }
}

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
 * Decodes the bytes of a contiguous tensor (a copy): values for f32, f16 and i32, raw blocks for
 * quantized types. With `owned` (bytes nobody else holds, as a buffer's read gives them) the values view
 * the bytes where they are aligned, without a copy: a token's logits are read every step.
 *
 * @since 0.1.0
 * @category conversions
 */
export const decode = (dtype: DType.DType, bytes: Uint8Array, owned = false): HostArray => {
  const copy = owned && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    ? bytes
    : bytes.slice()
  switch (dtype) {
    case "f32":
      return new Float32Array(copy.buffer, 0, copy.byteLength / 4)
    case "f16":
      return Float16.decodeArray(new Uint16Array(copy.buffer, 0, copy.byteLength / 2))
    case "i32":
      return new Int32Array(copy.buffer, 0, copy.byteLength / 4)
    default:
      return copy
  }
}
