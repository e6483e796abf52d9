/**
 * The models against llama.cpp (tools/llama-oracle: node-llama-cpp 3.21.1's CPU build, flash attention
 * on): at every prompt position log-probabilities within a bound and the same likeliest token, at each
 * of 16 greedy steps the same choice, and the same free-running continuation; on the CPU backend and on
 * WebGPU (lavapipe in CI).
 */
import { Cpu, Registry } from "@effect-gpu/core"
import { WebGpu } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import type { Answers } from "./oracle/agreement.js"
import { bound, judge, run } from "./oracle/agreement.js"
import { continuation, models, prompt } from "./oracle/cases.js"

const oracle = JSON.parse(readFileSync(new URL("./oracle/llama.cpp.json", import.meta.url), "utf8")) as {
  readonly models: Record<string, Answers>
}

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
  })

suite(false)
suite(true)
