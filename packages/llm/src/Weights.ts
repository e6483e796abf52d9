/**
 * A model's tensors in a device's memory, loaded from GGUF bytes as they are (quantized blocks stay
 * blocks: no dequantized copy), in buffers of the device's buffer type that each stay within its largest
 * buffer. Graphs use them through `AllocateOptions.bindings`.
 *
 * @since 0.1.0
 */
import type * as Device from "@effect-gpu/core/Device"
import type { BackendError, DeviceLost, OutOfBounds, Released } from "@effect-gpu/core/GpuError"
import { AllocationError } from "@effect-gpu/core/GpuError"
import * as Plan from "@effect-gpu/core/Plan"
import * as Tensor from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Gguf from "./Gguf.js"
import { ModelError } from "./ModelError.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Weights {
  /** the model's tensors (leafs flagged as params) by their GGUF names */
  readonly tensors: ReadonlyMap<string, Tensor.Tensor>
  /**
   * tensors that join others lying back to back in one buffer, by the name ggml gives a fused weight:
   * `blk.N.attn_qkv.weight` is layer N's q, k and v weights as one [hidden, q + k + v rows] matrix, and
   * `blk.N.ffn_gate_up.weight` its gate and up weights as one [hidden, 2 ffn rows] matrix, so a prompt's
   * three projections, and its two feed-forward products, run as one product each (no copy: a stack is
   * bound over its parts' memory)
   */
  readonly stacks: ReadonlyMap<string, Tensor.Tensor>
  /** where each tensor and stack lives: pass them as `AllocateOptions.bindings` */
  readonly bindings: ReadonlyArray<Plan.Binding>
  readonly bytes: number
}

/**
 * Where a model's bytes come from: the whole file in memory, or reads by offset (a file too large for
 * one buffer).
 *
 * @since 0.1.0
 * @category models
 */
export interface Source {
  /** the file's size in bytes */
  readonly size: number
  readonly read: (offset: number, length: number) => Effect.Effect<Uint8Array, ModelError>
}

/**
 * A source over bytes in memory.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromBytes = (bytes: Uint8Array): Source => ({
  size: bytes.byteLength,
  read: (offset, length) => Effect.succeed(bytes.subarray(offset, offset + length))
})

/**
 * A source over a Blob (a browser's File from a file input, a fetched Response's blob), read a slice at a
 * time, so that a model is never whole in memory; a failed or short read fails with ModelError naming
 * `file`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromBlob = (blob: Blob, file: string): Source => ({
  size: blob.size,
  read: (offset, length) =>
    Effect.tryPromise({
      try: () => blob.slice(offset, offset + length).arrayBuffer(),
      catch: (e) => new ModelError({ file, problem: `cannot be read: ${e instanceof Error ? e.message : String(e)}` })
    }).pipe(
      Effect.filterOrFail(
        (bytes) => bytes.byteLength === length,
        (bytes) =>
          new ModelError({
            file,
            problem: `truncated: ${length} bytes at ${offset} were asked, ${bytes.byteLength} were there`
          })
      ),
      Effect.map((bytes) => new Uint8Array(bytes))
    )
})

/**
 * How far a load is: bytes copied of the total, and the tensor just copied.
 *
 * @since 0.1.0
 * @category models
 */
export interface Progress {
  readonly bytes: number
  readonly total: number
  readonly tensor: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface LoadOptions {
  /** names the file in failures */
  readonly file?: string
  /** called after each tensor */
  readonly onProgress?: (progress: Progress) => Effect.Effect<void>
  /** the largest piece written at once (bytes); default 64 MiB */
  readonly chunk?: number
  /**
   * where the device computes on host memory and the file is in memory (the CPU): wrap its bytes as they
   * are, no copy (default true)
   */
  readonly map?: boolean
}

/** each stack's name and its parts' names, of layer N */
const STACKS: ReadonlyArray<{ readonly name: string; readonly parts: ReadonlyArray<string> }> = [
  { name: "attn_qkv", parts: ["attn_q", "attn_k", "attn_v"] },
  { name: "ffn_gate_up", parts: ["ffn_gate", "ffn_up"] }
]

/** the parts of a stack by the stack's name: a layer's attention projections, its gate and up weights */
const stackParts = (tensors: ReadonlyMap<string, Tensor.Tensor>) => {
  const stacks: Array<{ name: string; parts: ReadonlyArray<Tensor.Tensor> }> = []
  for (const name of tensors.keys()) {
    const layer = /^blk\.(\d+)\.attn_q\.weight$/.exec(name)?.[1]
    if (layer === undefined) continue
    for (const stack of STACKS) {
      const parts = stack.parts.map((w) => tensors.get(`blk.${layer}.${w}.weight`))
      if (parts.every((t): t is Tensor.Tensor => t !== undefined)) {
        stacks.push({ name: `blk.${layer}.${stack.name}.weight`, parts })
      }
    }
  }
  return stacks
}

/** `tensors` with each stack's parts moved together, in their stack's order, where the first of them was */
const stackOrder = (tensors: ReadonlyArray<Tensor.Tensor>): Array<Tensor.Tensor> => {
  const byName = new Map(tensors.map((t) => [t.name, t]))
  const follow = new Map<number, ReadonlyArray<Tensor.Tensor>>()
  const moved = new Set<number>()
  for (const { parts } of stackParts(byName)) {
    follow.set(parts[0].id, parts.slice(1))
    for (const t of parts.slice(1)) moved.add(t.id)
  }
  return tensors.flatMap((t) => (moved.has(t.id) ? [] : [t, ...(follow.get(t.id) ?? [])]))
}

/**
 * The weights with their stacks: one where the parts share a type, a row length and a buffer, and each
 * begins where the one before ends (a tensor whose size is not a multiple of the buffer type's alignment
 * leaves a gap: no stack there).
 */
const withStacks = (
  tensors: ReadonlyArray<Tensor.Tensor>,
  bindings: ReadonlyArray<Plan.Binding>,
  bytes: number
): Effect.Effect<Weights> =>
  Effect.gen(function*() {
    const byName = new Map(tensors.map((t) => [t.name, t]))
    const at = new Map(bindings.map((b) => [b.tensor.id, b]))
    const stacks = new Map<string, Tensor.Tensor>()
    const bound: Array<Plan.Binding> = [...bindings]
    for (const { name, parts } of stackParts(byName)) {
      const first = parts[0]
      const places = parts.map((t) => at.get(t.id))
      const joined = parts.every((t, i) => {
        const place = places[i]
        const before = i === 0 ? undefined : places[i - 1]
        return place !== undefined && t.dtype === first.dtype && t.ne[0] === first.ne[0] && t.ne[2] === 1 &&
          t.ne[3] === 1 && Tensor.isContiguous(t) &&
          (before === undefined ||
            (place.buffer === before.buffer && place.offset === before.offset + Tensor.nbytes(parts[i - 1])))
      })
      if (!joined) continue
      const rows = parts.reduce((sum, t) => sum + t.ne[1], 0)
      const stack = yield* Tensor.make(name, first.dtype, [first.ne[0], rows], { flags: Tensor.Flags.param }).pipe(
        Effect.orDie // the parts' own shapes were valid, and so is their join
      )
      stacks.set(name, stack)
      bound.push({ tensor: stack, buffer: places[0]!.buffer, offset: places[0]!.offset })
    }
    return { tensors: byName, stacks, bindings: bound, bytes }
  })

/**
 * Loads every tensor of `gguf` (whose bytes are `bytes`: the whole file, or a Source) into `device`'s
 * memory, a chunk at a time. A model that does not fit fails with AllocationError before any byte is
 * copied; the memory lives as long as the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const load = (
  device: Device.Device,
  gguf: Gguf.GgufFile,
  bytes: Uint8Array | Source,
  options: LoadOptions = {}
): Effect.Effect<
  Weights,
  ModelError | AllocationError | DeviceLost | Released | OutOfBounds | BackendError,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const file = options.file ?? "<bytes>"
    const source = bytes instanceof Uint8Array ? fromBytes(bytes) : bytes
    const bufferType = device.bufferType
    const last = gguf.tensors.reduce((end, t) => Math.max(end, t.offset + t.nbytes), 0)
    if (last > source.size) {
      return yield* new ModelError({
        file,
        problem: `truncated: the tensors need ${last} bytes, the file has ${source.size}`
      })
    }
    const tensors = yield* Effect.forEach(gguf.tensors, (info) =>
      Tensor.make(info.name, info.dtype, info.ne, { flags: Tensor.Flags.param }).pipe(
        Effect.mapError((e) =>
          new ModelError({ file, problem: `tensor ${info.name}: ${e.message}` })
        )
      ))
    const total = gguf.tensors.reduce((s, t) => s + t.nbytes, 0)
    // mapped: the file's own bytes, each tensor at its offset (GGUF aligns them as a buffer type needs)
    if (
      options.map !== false && bytes instanceof Uint8Array && device.caps.bufferFromHostPtr &&
      bufferType.isHost && gguf.alignment % bufferType.alignment === 0 && bytes.byteOffset % bufferType.alignment === 0
    ) {
      const buffer = yield* device.bufferFromHost(bytes, { usage: "weights" })
      let mapped = 0
      const bindings: Array<Plan.Binding> = []
      for (const [i, tensor] of tensors.entries()) {
        const info = gguf.tensors[i]
        bindings.push({ tensor, buffer, offset: info.offset })
        mapped += info.nbytes
        if (options.onProgress !== undefined) yield* options.onProgress({ bytes: mapped, total, tensor: info.name })
      }
      return yield* withStacks(tensors, bindings, total)
    }
    const memory = yield* device.memory
    if (total > memory.free) {
      return yield* new AllocationError({
        bufferType: bufferType.name,
        requested: total,
        available: memory.free,
        reason: `the model's ${gguf.tensors.length} tensors (${total} bytes) do not fit ${device.name}`
      })
    }
    // over buffers within the device's largest; a tensor past that fails before anything is allocated.
    // A layer's q, k and v go back to back (as GGUF files order them anyway) so that they can stack
    const bindings = yield* Plan.bind(bufferType, stackOrder(tensors))
    const chunk = options.chunk ?? 64 * 1024 * 1024
    let copied = 0
    for (const binding of bindings) {
      const info = gguf.tensors[tensors.indexOf(binding.tensor)]
      for (let at = 0; at < info.nbytes; at += chunk) {
        const end = Math.min(info.nbytes, at + chunk)
        yield* binding.buffer.set(binding.offset + at, yield* source.read(info.offset + at, end - at))
      }
      copied += info.nbytes
      if (options.onProgress !== undefined) yield* options.onProgress({ bytes: copied, total, tensor: info.name })
    }
    return yield* withStacks(tensors, bindings, total)
  }).pipe(Effect.withSpan("Weights.load", { attributes: { device: device.name, tensors: gguf.tensors.length } }))
