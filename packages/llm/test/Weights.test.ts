import { Cpu, Registry } from "@effect-gpu/core"
import { Fixture, Gguf, Weights } from "@effect-gpu/llm"
import { TestGpu } from "@effect-gpu/testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

const bytes = Fixture.make({
  architecture: "llama",
  dtype: "q4_0",
  hidden: 256,
  layers: 2,
  heads: 8,
  kvHeads: 2,
  ffn: 512,
  vocab: 300
})
const file = Effect.runSync(Gguf.parse(bytes))
const total = file.tensors.reduce((s, t) => s + t.nbytes, 0)

/** every tensor's bytes in device memory equal the file's */
const sameBytes = (weights: Weights.Weights) =>
  Effect.forEach(weights.bindings, (b) =>
    Effect.gen(function*() {
      const info = file.tensors.find((t) => t.name === b.tensor.name)!
      const held = yield* b.buffer.get(b.offset, info.nbytes)
      assert.deepStrictEqual(held, bytes.subarray(info.offset, info.offset + info.nbytes), info.name)
    }))

describe("loading weights", () => {
  it.scoped("every tensor lands in device memory as its raw blocks, with progress to the last byte", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const seen: Array<Weights.Progress> = []
      const weights = yield* Weights.load(device, file, bytes, {
        onProgress: (p) => Effect.sync(() => void seen.push(p))
      })
      assert.strictEqual(weights.tensors.size, file.tensors.length)
      assert.strictEqual(weights.bytes, total)
      assert.strictEqual(weights.tensors.get("blk.0.attn_q.weight")?.dtype, "q4_0")
      yield* sameBytes(weights)
      assert.strictEqual(seen.length, file.tensors.length)
      assert.isTrue(seen.every((p, i) => p.total === total && (i === 0 || p.bytes > seen[i - 1].bytes)))
      assert.strictEqual(seen[seen.length - 1].bytes, total)
      // blocks, not a dequantized copy: the device holds about the file's bytes
      assert.isBelow(device.ledger.snapshot().bytes, total * 1.1)
    }).pipe(Effect.provide(Cpu.layer())))

  it.scoped("on the CPU a file in memory is mapped, not copied; map: false copies it", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const mapped = yield* Weights.load(device, file, bytes)
      const buffers = new Set(mapped.bindings.map((b) => b.buffer))
      assert.strictEqual(buffers.size, 1)
      const [buffer] = buffers
      assert.strictEqual(buffer.host?.buffer, bytes.buffer)
      yield* sameBytes(mapped)
      const copied = yield* Weights.load(device, file, bytes, { map: false })
      assert.isTrue(copied.bindings.every((b) => b.buffer.host?.buffer !== bytes.buffer))
      yield* sameBytes(copied)
    }).pipe(Effect.provide(Cpu.layer())))

  it.scoped("tensors spread over several buffers where one buffer is too small for the model", () =>
    Effect.gen(function*() {
      const weights = yield* Weights.load(yield* Registry.bestDevice, file, bytes)
      assert.isAbove(new Set(weights.bindings.map((b) => b.buffer)).size, 1)
      yield* sameBytes(weights)
    }).pipe(Effect.provide(TestGpu.layer({ maxBufferSize: 256 * 1024 }))))

  it.effect("a model that does not fit fails with AllocationError before anything is allocated", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const error = yield* Effect.flip(Effect.scoped(Weights.load(device, file, bytes)))
      assert.strictEqual(error._tag, "AllocationError")
      assert.strictEqual(device.ledger.snapshot().buffers, 0)
    }).pipe(Effect.provide(TestGpu.layer({ memory: Math.floor(total / 2) }))))

  it.effect("a tensor larger than one buffer fails with AllocationError naming it, before anything is allocated", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const error = yield* Effect.flip(Effect.scoped(Weights.load(device, file, bytes)))
      assert.strictEqual(error._tag, "AllocationError")
      assert.include(error.message, "token_embd.weight")
      assert.strictEqual(device.ledger.snapshot().buffers, 0)
    }).pipe(Effect.provide(TestGpu.layer({ maxBufferSize: 4096 }))))

  it.effect("a file cut short fails with ModelError", () =>
    Effect.gen(function*() {
      const device = yield* Registry.bestDevice
      const error = yield* Effect.flip(Effect.scoped(Weights.load(device, file, bytes.subarray(0, bytes.length - 100), {
        file: "cut.gguf"
      })))
      assert.strictEqual(error._tag, "ModelError")
      assert.match(error.message, /^cut\.gguf: truncated/)
    }).pipe(Effect.provide(Cpu.layer())))
})
