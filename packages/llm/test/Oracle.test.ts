/**
 * The models against llama.cpp (tools/llama-oracle: node-llama-cpp 3.21.1's CPU build, flash attention
 * on): at every prompt position log-probabilities within a bound and the same likeliest token, at each
 * of 16 greedy steps the same choice, and the same free-running continuation; for models naming their
 * pooling, the prompt's embedding within a bound; on the CPU backend and on WebGPU (lavapipe in CI).
 */
import { Cpu, Registry } from "@effect-gpu/core"
import { Fixture, Llm } from "@effect-gpu/llm"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import type { Answers } from "./oracle/agreement.js"
import { bound, judge, run } from "./oracle/agreement.js"
import { continuation, embeddings, models, prompt } from "./oracle/cases.js"

const oracle = JSON.parse(readFileSync(new URL("./oracle/llama.cpp.json", import.meta.url), "utf8")) as {
  readonly models: Record<string, Answers>
  readonly embeddings: Record<string, ReadonlyArray<number>>
}

/**
 * the largest difference of two embeddings against the oracle's largest magnitude: llama.cpp's CPU backend
 * rounds activations to q8 blocks for quantized weights, which ours does in its own order
 */
const EMBEDDING_BOUND: Record<string, number> = { f32: 1e-3, f16: 1e-3, q8_0: 1e-2 }

const suite = (gpu: boolean) =>
  describe(`llama.cpp's answers on ${gpu ? "WebGPU" : "the CPU"}`, () => {
    for (const { name, options } of models) {
      it.scoped(
        `${name}: ${prompt.length} positions' log-probabilities and top tokens, ${continuation} greedy tokens`,
        () =>
          Effect.gen(function*() {
            const devices = yield* Registry.devices
            const device = devices.find((d) => gpu ? d.name.startsWith("WebGPU") : d.name === "CPU")
            if (device === undefined) {
              if (process.env.CI === "true") assert.fail("no WebGPU adapter under CI=true")
              console.log("no WebGPU adapter here: the oracle's WebGPU tests are skipped")
              return
            }
            const want = oracle.models[name]
            const limit = bound(options.dtype)
            const { decisive, disagreements, worst } = judge(yield* run(device, options, want.greedy), want, limit)
            assert.deepStrictEqual(disagreements, [], name)
            assert.isBelow(worst, limit, `${name}: the largest log-probability difference`)
            assert.isAtLeast(decisive, 12, `${name}: positions whose likeliest token is clear`)
          }).pipe(Effect.provide(gpu ? WebGpu.layerOrCpu() : Cpu.layer())),
        120_000
      )
    }
    for (const { name, options } of embeddings) {
      it.scoped(`${name}: the prompt's embedding, pooled as the model names`, () =>
        Effect.gen(function*() {
          const device = (yield* Registry.devices).find((d) => gpu ? d.name.startsWith("WebGPU") : d.name === "CPU")
          if (device === undefined) {
            if (process.env.CI === "true") assert.fail("no WebGPU adapter under CI=true")
            return
          }
          const model = yield* Llm.fromBytes(Fixture.make(options), { size: 256, device })
          const ours = yield* model.embed(prompt)
          const want = oracle.embeddings[name]
          assert.strictEqual(ours.length, want.length)
          let diff = 0
          let scale = 0
          want.forEach((v, i) => (diff = Math.max(diff, Math.abs(ours[i] - v)), scale = Math.max(scale, Math.abs(v))))
          assert.isBelow(diff / scale, EMBEDDING_BOUND[options.dtype], name)
        }).pipe(Effect.provide(gpu ? WebGpu.layerOrCpu() : Cpu.layer())), 120_000)
    }
  })

suite(false)
suite(true)
