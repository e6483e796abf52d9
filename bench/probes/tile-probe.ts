/**
 * One mul_mat tiling over several sizes in one process: wall time of compute + synchronize (median of
 * 20 after 2 s of load) and the kernel's GPU time from timestamp queries (every 5th run), to tell a slow
 * kernel from a slow moment of the machine. The tiling: `auto` (the backend's choice, f16), an f16
 * subgroup-matrix tiling SRxSC:FRxFC:DEPTH, or an f32 register tiling f32:MxN:DEPTH[u] (as the bench's
 * --tile and --regs).
 *
 *   tsx tile-probe.ts 2x2:4x4:32 4096 8192 4096
 *   tsx tile-probe.ts f32:8x8:8 4096
 *   OWN=ab tsx tile-probe.ts f32:8x8:8 4096   # a and b each in a buffer of their own
 *
 * By default a and b sit in the plan's leaf buffer, bound read-only; LEAF=0 puts them in the compute
 * buffer with the result, so all three are bound read_write; OWN=a puts a (as an LLM's weights) in a
 * buffer of its own, OWN=ab both operands.
 */
import { Graph, Ops } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { warmUp } from "../case.js"
import { openDawn } from "../dawn.js"
import { parseRegs, parseTile } from "../tilings.js"

const [tileArg = "auto", ...sizes] = process.argv.slice(2)
const f32 = tileArg.startsWith("f32:")
const dtype = f32 ? "f32" : "f16"
const tiling = f32
  ? { registerTile: parseRegs(tileArg.slice(4)) }
  : tileArg === "auto"
  ? {}
  : { matrixTile: parseTile(tileArg) }

const median = (xs: ReadonlyArray<number>) => [...xs].sort((p, q) => p - q)[xs.length >> 1]

const main = Effect.gen(function*() {
  yield* Effect.promise(() => openDawn())
  const [device] = yield* WebGpu.make({ devices: 1, ...tiling })
  const backend = yield* device.makeBackend()
  for (const n of (sizes.length > 0 ? sizes : ["4096"]).map(Number)) {
    yield* Effect.scoped(Effect.gen(function*() {
      const g = Graph.make()
      const a = yield* g.param("a", dtype, [n, n])
      const b = yield* g.input("b", dtype, [n, n])
      yield* g.output(Ops.mulMat(a, b))
      const own = process.env.OWN ?? ""
      const bindings = yield* Effect.forEach(
        [a, b].filter((t) => own.includes(t.name)),
        (tensor) =>
          Effect.map(device.bufferType.allocate(n * n * (f32 ? 4 : 2)), (buffer) => ({ tensor, buffer, offset: 0 }))
      )
      const plan = yield* backend.allocate(g.build(), { bindings, leafBuffer: process.env.LEAF !== "0" })
      yield* plan.set(a, Generators.values(1, n * n, { min: 0.05, max: 0.5 }))
      yield* plan.set(b, Generators.values(2, n * n, { min: 0.05, max: 0.5 }))
      const wall: Array<number> = []
      const gpuMs: Array<number> = []
      yield* warmUp(Effect.zipRight(backend.compute(plan), backend.synchronize), 2000)
      for (let i = 0; i < 20; i++) {
        const t = performance.now()
        yield* backend.compute(plan)
        yield* backend.synchronize
        wall.push(performance.now() - t)
        if (i % 5 === 4) {
          const trace = yield* backend.captureNext
          yield* backend.compute(plan)
          gpuMs.push(((yield* trace).entries[0].gpuTimeNs ?? NaN) / 1e6)
        }
      }
      const tflops = (ms: number) => (2 * n ** 3 / ms / 1e9).toFixed(1)
      console.log(
        `${tileArg} n=${n}: wall ${median(wall).toFixed(3)} ms (${tflops(median(wall))} TFLOP/s); GPU ${
          gpuMs.map((x) => x.toFixed(3)).join(", ")
        } ms (median ${tflops(median(gpuMs))} TFLOP/s)`
      )
    }))
  }
})

Effect.runPromise(Effect.scoped(main)).then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
