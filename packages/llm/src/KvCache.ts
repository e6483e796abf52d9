/**
 * A model's KV cache: per layer, the keys and the values of every position so far, in f16 device memory
 * (f32 where the device has no f16; llama.cpp's layout: one row of `headDim × kvHeads` per position). Graphs write a batch's rows with
 * set_rows at the batch's positions and attend over a view of the first positions.
 *
 * @since 0.1.0
 */
import type * as BufferType from "@effect-gpu/core/BufferType"
import type { AllocationError, DeviceLost, Released, ShapeError } from "@effect-gpu/core/GpuError"
import * as Plan from "@effect-gpu/core/Plan"
import * as Tensor from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Hyperparameters } from "./Hyperparameters.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface KvCache {
  /** positions it holds */
  readonly size: number
  readonly dtype: "f16" | "f32"
  /** per layer: [headDim × kvHeads, size] f16 */
  readonly keys: ReadonlyArray<Tensor.Tensor>
  readonly values: ReadonlyArray<Tensor.Tensor>
  /** where they live: pass them with the weights' as `AllocateOptions.bindings` */
  readonly bindings: ReadonlyArray<Plan.Binding>
  readonly bytes: number
}

/**
 * Allocates a cache of `size` positions for `h` in `bufferType`'s memory (one buffer per layer, so that a
 * long context stays within the device's largest buffer); it lives as long as the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  h: Hyperparameters,
  bufferType: BufferType.BufferType,
  size: number,
  dtype: "f16" | "f32" = "f16"
): Effect.Effect<KvCache, AllocationError | DeviceLost | Released | ShapeError, Scope.Scope> =>
  Effect.gen(function*() {
    const row = h.headDim * h.kvHeads
    const keys: Array<Tensor.Tensor> = []
    const values: Array<Tensor.Tensor> = []
    const bindings: Array<Plan.Binding> = []
    for (let l = 0; l < h.layers; l++) {
      const k = yield* Tensor.make(`cache_k.${l}`, dtype, [row, size], { flags: Tensor.Flags.param })
      const v = yield* Tensor.make(`cache_v.${l}`, dtype, [row, size], { flags: Tensor.Flags.param })
      keys.push(k)
      values.push(v)
      bindings.push(...yield* Plan.bind(bufferType, [k, v], { usage: "compute" }))
    }
    return { size, dtype, keys, values, bindings, bytes: 2 * h.layers * row * size * (dtype === "f16" ? 2 : 4) }
  })

/**
 * The keys (or values) of layer `l` at positions `[0, length)` as flash_attn_ext reads them:
 * [headDim, length, kvHeads], a strided view of `written` (the set_rows that stored this batch, so that
 * attention runs after it).
 *
 * @since 0.1.0
 * @category views
 */
export const window = (
  h: Hyperparameters,
  written: Tensor.Tensor,
  length: number
): Effect.Effect<Tensor.Tensor, ShapeError> => {
  const element = written.dtype === "f16" ? 2 : 4
  const row = h.headDim * h.kvHeads * element
  return Tensor.view(written, [h.headDim, length, h.kvHeads], [row, h.headDim * element, row * length], 0)
}
