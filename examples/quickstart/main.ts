/**
 * quickstart: matmul -> add -> softmax (program.ts) on the best device there is (a WebGPU adapter, else the CPU).
 *
 *   pnpm demo                                  # prints the device and the result
 *   EFFECT_GPU_TRACE=trace.json pnpm demo      # also writes a trace of the compute (kernels, WGSL, timings)
 *   EFFECT_GPU_CHROME_TRACE=t.json pnpm demo   # the same as Chrome trace events (Perfetto, chrome://tracing)
 */
import { Trace } from "@effect-gpu/core"
import { WebGpu } from "@effect-gpu/webgpu"
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Config, Console, Effect, Layer, Option } from "effect"
import { M, N, run } from "./program.js"

const program = Effect.gen(function*() {
  const tracePath = yield* Config.option(Config.string("EFFECT_GPU_TRACE"))
  const chromePath = yield* Config.option(Config.string("EFFECT_GPU_CHROME_TRACE"))
  const outcome = yield* run(Option.isSome(tracePath) || Option.isSome(chromePath))
  yield* Console.log(`device: ${outcome.device} (${outcome.type}) - ${outcome.description}`)
  yield* Console.log(`softmax(w^T x + bias), ${M}x${N}, one column per line:`)
  for (let j = 0; j < N; j++) {
    const col = outcome.result.slice(j * M, (j + 1) * M)
    yield* Console.log(
      `  [${col.map((v) => v.toFixed(4)).join(", ")}]  sum=${col.reduce((a, b) => a + b, 0).toFixed(4)}`
    )
  }
  const t = outcome.trace
  if (t !== undefined) {
    const fs = yield* FileSystem.FileSystem
    yield* Console.log(`\n${Trace.format(t)}`)
    if (Option.isSome(tracePath)) {
      yield* fs.writeFileString(tracePath.value, Trace.toJson(t))
      yield* Console.log(`trace written to ${tracePath.value}`)
    }
    if (Option.isSome(chromePath)) {
      yield* fs.writeFileString(chromePath.value, Trace.toChromeTrace(t))
      yield* Console.log(`Chrome trace events written to ${chromePath.value} (open in Perfetto or chrome://tracing)`)
    }
  }
})

program.pipe(
  Effect.provide(Layer.merge(WebGpu.layerOrCpu(), NodeContext.layer)),
  NodeRuntime.runMain
)
