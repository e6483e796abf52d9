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

/** the file's bytes of a tensor, or of a stack's parts one after the other */
const fileBytes = (name: string): Uint8Array => {
  const stacked = name.includes(".attn_qkv.")
    ? ["q", "k", "v"].map((w) => name.replace(".attn_qkv.", `.attn_${w}.`))
    : name.includes(".ffn_gate_up.")
    ? ["gate", "up"].map((w) => name.replace(".ffn_gate_up.", `.ffn_${w}.`))
    : undefined
  if (stacked !== undefined) {
    const parts = stacked.map(fileBytes)
    const joined = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
    parts.reduce((at, p) => (joined.set(p, at), at + p.length), 0)
    return joined
  }
  const info = file.tensors.find((t) => t.name === name)!
  return bytes.subarray(info.offset, info.offset + info.nbytes)
}

/** every tensor's and stack's bytes in device memory equal the file's */
const sameBytes = (weights: Weights.Weights) =>
  Effect.forEach(weights.bindings, (b) =>
    Effect.gen(function*() {
      const want = fileBytes(b.tensor.name)
      assert.deepStrictEqual(yield* b.buffer.get(b.offset, want.length), want, b.tensor.name)
    }))

/** each layer's q, k and v stacked, [hidden, q + k + v rows], and its gate and up, [hidden, 2 ffn rows] */
const allStacked = (weights: Weights.Weights) => {
  assert.sameMembers([...weights.stacks.keys()], [
    "blk.0.attn_qkv.weight",
    "blk.1.attn_qkv.weight",
    "blk.0.ffn_gate_up.weight",
    "blk.1.ffn_gate_up.weight"
  ])
  for (const [name, stack] of weights.stacks) {
    const rows = name.includes("qkv") ? 256 + 64 + 64 : 2 * 512
    assert.deepStrictEqual([stack.dtype, ...stack.ne], ["q4_0", 256, rows, 1, 1], name)
  }
}

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
      allStacked(weights)
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
      allStacked(mapped)
      yield* sameBytes(mapped)
      const copied = yield* Weights.load(device, file, bytes, { map: false })
      assert.isTrue(copied.bindings.every((b) => b.buffer.host?.buffer !== bytes.buffer))
      allStacked(copied)
      yield* sameBytes(copied)
    }).pipe(Effect.provide(Cpu.layer())))

  it.scoped("tensors spread over several buffers where one buffer is too small for the model", () =>
    Effect.gen(function*() {
      const weights = yield* Weights.load(yield* Registry.bestDevice, file, bytes)
      assert.isAbove(new Set(weights.bindings.map((b) => b.buffer)).size, 1)
      yield* sameBytes(weights)
    }).pipe(Effect.provide(TestGpu.layer({ maxBufferSize: 256 * 1024 }))))

  it.scoped("q, k and v stack only where they lie back to back in one buffer", () =>
    Effect.gen(function*() {
      // rows of 18 bytes: q's 576 bytes and k's 288 lie back to back in the file (aligned to 32), not in
      // buffers aligned to 256
      const small = Fixture.make({
        architecture: "llama",
        dtype: "q4_0",
        hidden: 32,
        layers: 1,
        heads: 2,
        kvHeads: 1,
        ffn: 64,
        vocab: 300
      })
      const smallFile = yield* Gguf.parse(small)
      const gpu = yield* Weights.load(yield* Registry.bestDevice, smallFile, small)
      assert.strictEqual(gpu.stacks.size, 0)
      assert.isTrue(gpu.bindings.every((b) => !b.tensor.name.includes("attn_qkv")))
      const cpu = yield* Effect.flatMap(Registry.bestDevice, (device) => Weights.load(device, smallFile, small)).pipe(
        Effect.provide(Cpu.layer())
      )
      assert.deepStrictEqual(cpu.stacks.get("blk.0.attn_qkv.weight")?.ne, [32, 32 + 16 + 16, 1, 1])
    }).pipe(Effect.provide(TestGpu.layer())))

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
