/**
 * The f16 copy of a prompt product's quantized weights alone (half_copy), per form: how it loads its runs
 * (`words`, `ahead`, `vec4`), its vec4s a thread (4, 8, 16: runs of 128, 256, 512 blocks) and its stores'
 * width (`half4`, 8 bytes; `wide`, 16). Traced: GPU time of the copy's dispatch (median of 10) and its rate
 * over the bytes it reads and writes, and the GPU time of the product over the copy after it; beside them a
 * plain f16 -> f16 copy of the same values (cont of a contiguous tensor, vec4 element-wise), what the
 * device's copies reach at that size. Over sizes M, whether a copy small enough to stay in the L2 cache
 * between computes (its writes then not all going out to memory) runs at a higher rate than a large one.
 *
 *   tsx copy-probe.ts [M K] [FORM...]     FORM: LOADS:VECS:STORES, e.g. ahead:4:half4 (the default form)
 */
import { Graph, Ops } from "@effect-gpu/core"
import type { Backend } from "@effect-gpu/core/Backend"
import type { Plan } from "@effect-gpu/core/Plan"
import * as Quant from "@effect-gpu/core/Quant"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { warmUp } from "../case.js"

const args = process.argv.slice(2)
const sized = args.length >= 2 && /^\d+$/.test(args[0]) && /^\d+$/.test(args[1])
const [M, K] = sized ? [Number(args[0]), Number(args[1])] : [14336, 4096]
const formArgs = sized ? args.slice(2) : args
const forms = formArgs.length > 0
  ? formArgs
  : [
    "words:4:half4",
    "ahead:4:half4",
    "ahead:8:half4",
    "ahead:16:half4",
    "ahead:4:wide",
    "ahead:8:wide",
    "ahead:16:wide",
    "vec4:8:wide"
  ]
const N = 512

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

// the GPU time of the dispatch `kernel` picks, and of the plan's other dispatches (the product over the copy)
const timed = (backend: Backend, plan: Plan, kernel: (k: string) => boolean) =>
  Effect.gen(function*() {
    yield* warmUp(backend.compute(plan))
    const us: Array<number> = []
    const rest: Array<number> = []
    let name = ""
    for (let r = 0; r < 10; r++) {
      const trace = yield* backend.captureNext
      yield* backend.compute(plan)
      const entries = (yield* trace).entries
      const entry = entries.find((e) => kernel(e.kernel))
      name = entry?.kernel ?? "none"
      us.push((entry?.gpuTimeNs ?? 0) / 1e3)
      rest.push(entries.filter((e) => e !== entry).reduce((t, e) => t + (e.gpuTimeNs ?? 0), 0) / 1e3)
    }
    return { us: median(us), rest: median(rest), kernel: name }
  })

const copyForm = (form: string, dtype: "q8_0" | "q4_0", blocks: Uint8Array) =>
  Effect.gen(function*() {
    const [loads, vecs, stores] = form.split(":")
    const [device] = yield* WebGpu.make({
      devices: 1,
      quantizedPrefill: "copy",
      copyLoads: loads as "words" | "ahead" | "vec4",
      copyShape: { vecs: Number(vecs) as 4 | 8 | 16, stores: stores as "half4" | "wide" }
    })
    const backend = yield* device.makeBackend()
    const g = Graph.make()
    const a = yield* g.param("a", dtype, [K, M])
    const b = yield* g.input("b", "f16", [K, N])
    yield* g.output(Ops.mulMat(a, b))
    const plan = yield* backend.allocate(g.build())
    yield* plan.set(a, blocks)
    yield* plan.set(b, Generators.values(2, K * N))
    const { kernel, rest, us } = yield* timed(backend, plan, (k) => k.startsWith("half_copy"))
    const bytes = blocks.length + 2 * M * K
    console.log(
      JSON.stringify({
        dtype,
        M,
        K,
        form,
        us: Number(us.toFixed(1)),
        tbs: Number((bytes / us / 1e6).toFixed(2)),
        kernel,
        productUs: Number(rest.toFixed(1)),
        tflops: Number((2 * M * N * K / rest / 1e6).toFixed(1))
      })
    )
  }).pipe(
    Effect.scoped,
    Effect.catchAll((e) => Effect.sync(() => console.log(JSON.stringify({ dtype, form, error: String(e) }))))
  )

const plainCopy = Effect.gen(function*() {
  const [device] = yield* WebGpu.make({ devices: 1 })
  const backend = yield* device.makeBackend()
  const g = Graph.make()
  const x = yield* g.input("x", "f16", [K, M])
  yield* g.output(Ops.cont(Ops.scale(x, 1)))
  const plan = yield* backend.allocate(g.build())
  yield* plan.set(x, Generators.values(1, K * M))
  const { kernel, us } = yield* timed(backend, plan, () => true)
  console.log(
    JSON.stringify({
      dtype: "f16",
      M,
      K,
      form: "plain",
      us: Number(us.toFixed(1)),
      tbs: Number((4 * M * K / us / 1e6).toFixed(2)),
      kernel
    })
  )
}).pipe(Effect.scoped)

Effect.runPromise(
  Effect.gen(function*() {
    yield* plainCopy
    const values = Generators.values(1, K * M)
    for (const dtype of ["q8_0", "q4_0"] as const) {
      const blocks = Quant.unsafeQuantize(dtype, values)
      for (const form of forms) yield* copyForm(form, dtype, blocks)
    }
  })
).catch((e) => {
  console.error(e)
  process.exit(1)
})
