import { Cpu, Registry } from "@effect-gpu/core"
import { Fixture, Gguf, Llm } from "@effect-gpu/llm"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

// f32 weights and an untied head, so that the head's rows can be read from the file as they are
const shape = {
  architecture: "llama",
  dtype: "f32",
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  ffn: 128,
  vocab: 300,
  seed: 13
} as const
const bytes = Fixture.make(shape)
const tokens = [1, 40, 271, 7, 120, 299, 33, 260, 64, 5, 181]
const n = shape.hidden

/** the largest difference between a and b, against b's largest magnitude */
const relative = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let diff = 0
  let scale = 0
  for (let i = 0; i < b.length; i++) {
    diff = Math.max(diff, Math.abs(a[i] - b[i]))
    scale = Math.max(scale, Math.abs(b[i]))
  }
  return diff / scale
}

describe("embeddings", () => {
  it.scoped("each token's embedding is what the head multiplies: head · embedding gives its logits", () =>
    Effect.gen(function*() {
      const model = yield* Llm.fromBytes(bytes, { size: 64 })
      const each = yield* model.embed(tokens, { pooling: "none" })
      assert.strictEqual(each.length, n * tokens.length)
      const logits = yield* model.evaluate(tokens)
      // the head's rows, from the file: output.weight [hidden, vocab] in f32
      const info = (yield* Gguf.parse(bytes)).tensors.find((t) => t.name === "output.weight")!
      const head = new Float32Array(bytes.slice(info.offset, info.offset + info.nbytes).buffer)
      const product = new Float32Array(shape.vocab * tokens.length)
      for (let t = 0; t < tokens.length; t++) {
        for (let v = 0; v < shape.vocab; v++) {
          let sum = 0
          for (let i = 0; i < n; i++) sum += head[v * n + i] * each[t * n + i]
          product[t * shape.vocab + v] = sum
        }
      }
      assert.isBelow(relative(product, logits), 1e-5)
    }).pipe(Effect.provide(Cpu.layer())))

  it.scoped("pooled by mean or last, normalized, by default as the model names it; micro-batches agree", () =>
    Effect.gen(function*() {
      const model = yield* Llm.fromBytes(bytes, { size: 64 })
      const each = yield* model.embed(tokens, { pooling: "none" })
      const mean = yield* model.embed(tokens, { pooling: "mean" })
      const last = yield* model.embed(tokens, { pooling: "last" })
      assert.strictEqual(mean.length, n)
      for (let i = 0; i < n; i++) {
        let sum = 0
        for (let t = 0; t < tokens.length; t++) sum += each[t * n + i]
        assert.closeTo(mean[i], sum / tokens.length, 1e-6)
      }
      assert.deepStrictEqual(Array.from(last), Array.from(each.slice((tokens.length - 1) * n)))
      const unit = yield* model.embed(tokens, { pooling: "mean", normalize: true })
      assert.closeTo(Math.sqrt(unit.reduce((s, v) => s + v * v, 0)), 1, 1e-6)
      assert.closeTo(unit[0] / mean[0], unit[5] / mean[5], 1e-5)
      // a model that names no pooling gives every token's; one that names "last" (Qwen3-Embedding) the last's
      assert.strictEqual((yield* model.embed(tokens)).length, n * tokens.length)
      const named = yield* Llm.fromBytes(Fixture.make({ ...shape, pooling: "last" }), { size: 64 })
      assert.deepStrictEqual(Array.from(yield* named.embed(tokens)), Array.from(last))
      // in micro-batches of 4, through the cache, the same as in one
      const small = yield* Llm.fromBytes(bytes, { size: 64, ubatch: 4 })
      assert.isBelow(relative(yield* small.embed(tokens, { pooling: "none" }), each), 1e-5)
      // a text, with BOS as the model asks; then a generation still runs (the cache holds the text's tokens)
      assert.strictEqual((yield* model.embed("hello there", { pooling: "mean" })).length, n)
      const refused = yield* Effect.flip(model.embed([1, 300]))
      assert.include(refused.message, "token 300 is outside the vocabulary of 300")
    }).pipe(Effect.provide(Cpu.layer())))

  it.scoped("on WebGPU: the CPU's embeddings", () =>
    Effect.gen(function*() {
      const gpu = (yield* Registry.devices).find((d) => d.name.startsWith("WebGPU"))
      if (gpu === undefined) {
        if (process.env.CI === "true") assert.fail("no WebGPU adapter under CI=true")
        console.log("no WebGPU adapter here: the embeddings' WebGPU test is skipped")
        return
      }
      const cpu = (yield* Registry.devices).find((d) => d.name === "CPU")!
      const [onGpu, onCpu] = yield* Effect.forEach([gpu, cpu], (device) =>
        Effect.flatMap(
          Llm.fromBytes(bytes, { size: 64, device }),
          (m) => m.embed(tokens, { pooling: "none" })
        ))
      assert.isBelow(relative(onGpu, onCpu), 1e-3)
    }).pipe(Effect.provide(WebGpu.layerOrCpu())))
})
