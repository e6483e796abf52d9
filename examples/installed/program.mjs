// A consumer of the packed libraries: plain node, no TypeScript, outside the workspace. Prints the device
// and a small product as JSON: `node program.mjs cpu` or `node program.mjs webgpu`.
import { Cpu, Graph, Ops, Registry } from "@effect-gpu/core"
import { TestGpu } from "@effect-gpu/testing"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"

const compute = Effect.gen(function*() {
  const device = yield* Registry.bestDevice
  const props = yield* device.props
  const backend = yield* device.makeBackend()
  const g = Graph.make()
  const a = yield* g.input("a", "f32", [3, 2])
  const b = yield* g.input("b", "f32", [3, 2])
  const y = yield* g.output(Ops.mulMat(a, b))
  const plan = yield* backend.allocate(g)
  yield* plan.set(a, [1, 2, 3, 4, 5, 6])
  yield* plan.set(b, [1, 0, 1, 0, 1, 0])
  yield* backend.compute(plan)
  return { device: props.name, type: props.type, result: Array.from(yield* plan.get(y)) }
})

const layer = process.argv[2] === "webgpu" ? WebGpu.layer({ devices: 1 }) : Cpu.layer()
Effect.runPromise(compute.pipe(Effect.scoped, Effect.provide(layer))).then(
  (out) => {
    console.log(JSON.stringify({ ...out, testGpu: typeof TestGpu.layer }))
    process.exit(0)
  },
  (error) => {
    console.error(String(error))
    process.exit(1)
  }
)
