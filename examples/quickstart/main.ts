/**
 * quickstart: matmul -> add -> softmax on the best device there is (a WebGPU adapter, else the CPU).
 *
 *   pnpm demo                                  # prints the device and the result
 *   EFFECT_GPU_TRACE=trace.json pnpm demo      # also writes a trace of the compute (kernels, WGSL, timings)
 *   EFFECT_GPU_CHROME_TRACE=t.json pnpm demo   # the same as Chrome trace events (Perfetto, chrome://tracing)
 */
import { Graph, Ops, Registry, Trace } from "@effect-gpu/core"
import { WebGpu } from "@effect-gpu/webgpu"
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Config, Console, Effect, Layer, Option } from "effect"

const M = 4 // rows of the result
const N = 3 // columns
const K = 8 // shared dimension

const program = Effect.gen(function*() {
  const device = yield* Registry.bestDevice
  const props = yield* device.props
  yield* Console.log(`device: ${props.name} (${props.type}) - ${props.description}`)
  const backend = yield* device.makeBackend()

  const g = Graph.make()
  const w = yield* g.input("w", "f32", [K, M])
  const x = yield* g.input("x", "f32", [K, N])
  const bias = yield* g.input("bias", "f32", [M, 1])
  const y = yield* g.output(Ops.softMax(Ops.add(Ops.mulMat(w, x), bias)), "y")

  const plan = yield* backend.allocate(g)
  yield* plan.set(w, Array.from({ length: K * M }, (_, i) => Math.sin(i + 1)))
  yield* plan.set(x, Array.from({ length: K * N }, (_, i) => Math.cos(i + 1)))
  yield* plan.set(bias, [0.1, -0.2, 0.3, -0.4])

  const tracePath = yield* Config.option(Config.string("EFFECT_GPU_TRACE"))
  const chromePath = yield* Config.option(Config.string("EFFECT_GPU_CHROME_TRACE"))
  const trace = Option.isSome(tracePath) || Option.isSome(chromePath)
    ? Option.some(yield* backend.captureNext)
    : Option.none()
  yield* backend.compute(plan)
  const out = yield* plan.get(y)

  yield* Console.log(`softmax(w^T x + bias), ${M}x${N}, one column per line:`)
  for (let j = 0; j < N; j++) {
    const col = Array.from(out.subarray(j * M, (j + 1) * M))
    yield* Console.log(
      `  [${col.map((v) => v.toFixed(4)).join(", ")}]  sum=${col.reduce((a, b) => a + b, 0).toFixed(4)}`
    )
  }
  if (Option.isSome(trace)) {
    const t = yield* trace.value
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
  Effect.scoped,
  Effect.provide(Layer.merge(WebGpu.layerOrCpu(), NodeContext.layer)),
  NodeRuntime.runMain
)
