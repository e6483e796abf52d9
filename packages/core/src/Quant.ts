/**
 * ggml's quantized block formats on the host: `quantize` makes a tensor's raw blocks from values as
 * ggml's reference quantizers do (byte for byte: the same f32 arithmetic, step by step), `dequantize`
 * reads them back. A quantized tensor takes and gives these blocks (`plan.set`, `plan.get`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as DType from "./DType.js"
import { ShapeError } from "./GpuError.js"
import * as internal from "./internal/quant.js"

const notWhole = (op: string, type: DType.Quantized, n: number, reason: string) =>
  new ShapeError({ op, shapes: [[n]], dtypes: [type], reason })

/**
 * The raw blocks of `values` in `type`: `values.length` must be a multiple of the block length (32, or
 * 256 for q4_K and q6_K), else ShapeError.
 *
 * @since 0.1.0
 * @category conversions
 */
export const quantize = (type: DType.Quantized, values: ArrayLike<number>): Effect.Effect<Uint8Array, ShapeError> =>
  Effect.suspend(() => {
    const n = DType.blockSize(type)
    return values.length % n !== 0
      ? Effect.fail(notWhole("quantize", type, values.length, `quantizes whole blocks of ${n} values`))
      : Effect.succeed(unsafeQuantize(type, values))
  })

/**
 * `quantize` for callers that know their length is whole blocks: throws a RangeError otherwise.
 *
 * @since 0.1.0
 * @category conversions
 */
export const unsafeQuantize = (type: DType.Quantized, values: ArrayLike<number>): Uint8Array => {
  if (values.length % DType.blockSize(type) !== 0) {
    throw new RangeError(`${type} quantizes whole blocks of ${DType.blockSize(type)} values; got ${values.length}`)
  }
  return internal.quantize(type, values instanceof Float32Array ? values : Float32Array.from(values))
}

/**
 * The values of raw blocks of `type`: `bytes` must be whole blocks, else ShapeError.
 *
 * @since 0.1.0
 * @category conversions
 */
export const dequantize = (type: DType.Quantized, bytes: Uint8Array): Effect.Effect<Float32Array, ShapeError> =>
  Effect.suspend(() => {
    const size = DType.typeSize(type)
    return bytes.byteLength % size !== 0
      ? Effect.fail(notWhole("dequantize", type, bytes.byteLength, `blocks are ${size} bytes each`))
      : Effect.succeed(internal.dequantize(type, bytes, bytes.byteLength / size))
  })

/**
 * `dequantize` for callers that know their bytes are whole blocks: throws a RangeError otherwise.
 *
 * @since 0.1.0
 * @category conversions
 */
export const unsafeDequantize = (type: DType.Quantized, bytes: Uint8Array): Float32Array => {
  const size = DType.typeSize(type)
  if (bytes.byteLength % size !== 0) throw new RangeError(`${type} blocks are ${size} bytes each`)
  return internal.dequantize(type, bytes, bytes.byteLength / size)
}
