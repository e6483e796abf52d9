/**
 * Decode attention alone: one query over a model's cache (heads 32/8, 544 keys) for each head size, in the
 * decode forms given. Traced (default): GPU time per dispatch, each in a timestamped pass of its own (~5 us
 * over an untraced dispatch, the same for every form). `--chain`: untraced, as a decoding step runs it: 32
 * attentions over the cache's own layout (a row of every KV head per position) in one compute, its wall time
 * a layer, beside 32 small adds (the floor of a dispatch and its barrier). A form is
 * SPLITS:BLOCK:SUBGROUPS[:keys|dims][:HEADS] (the scores' lanes across the keys or the head dimension; query
 * heads a workgroup), 0 keeping a default.
 *
 *   tsx attention-probe.ts [KEYS] [--chain] [FORM...]     (default 544, the default form and a few others)
 */
import { Graph, Ops, Tensor } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { kernelTimes, median, warmUp } from "../case.js"
import { parseAttention } from "../tilings.js"

const args = process.argv.slice(2)
const chain = args.includes("--chain")
const [keysArg, ...formArgs] = args.filter((a) => a !== "--chain")
const KEYS = Number(keysArg ?? 544)
const forms = formArgs.length > 0 ? formArgs : ["0:0:0", "0:0:0:dims", "10:0:0", "3:0:0", "0:0:2", "0:0:8"]
const [H, HKV, REPS, LAYERS] = [32, 8, 20, 32]

const traced = (form: string, D: number) =>
  Effect.gen(function*() {
    const [device] = yield* WebGpu.make({ devices: 1, attentionDecode: parseAttention(form) })
    const backend = yield* device.makeBackend()
    const g = Graph.make()
    const q = yield* g.input("q", "f32", [D, 1, H])
    const k = yield* g.input("k", "f16", [D, KEYS, HKV])
    const v = yield* g.input("v", "f16", [D, KEYS, HKV])
    const mask = yield* g.input("mask", "f16", [KEYS, 1])
    yield* g.output(Ops.flashAttnExt(q, k, v, { scale: 1 / Math.sqrt(D), mask }))
    const plan = yield* backend.allocate(g.build())
    yield* plan.set(q, Generators.values(1, D * H))
    yield* plan.set(k, Generators.values(2, D * KEYS * HKV))
    yield* plan.set(v, Generators.values(3, D * KEYS * HKV))
    yield* plan.set(mask, new Float32Array(KEYS))
    const kernels = (yield* kernelTimes(backend, backend.compute(plan), REPS)).map(({ kernel, us }) => ({
      kernel,
      us: Number(us.toFixed(2))
    }))
    console.log(JSON.stringify({ D, keys: KEYS, form, total_us: kernels.reduce((s, k) => s + k.us, 0), kernels }))
  }).pipe(Effect.scoped)

/** the median wall time of a compute of `build`'s graph over `reps` computes, in us a layer */
const wallPerLayer = (
  form: string,
  build: (g: Graph.Builder) => Effect.Effect<ReadonlyArray<Tensor.Tensor>, unknown>
) =>
  Effect.gen(function*() {
    const [device] = yield* WebGpu.make({ devices: 1, attentionDecode: parseAttention(form) })
    const backend = yield* device.makeBackend()
    const g = Graph.make()
    const inputs = yield* build(g)
    const plan = yield* backend.allocate(g.build())
    for (const t of inputs) yield* plan.set(t, Generators.values(t.id, Tensor.nelements(t)).map((x) => x * 0.1))
    yield* warmUp(backend.compute(plan))
    const walls: Array<number> = []
    for (let r = 0; r < REPS; r++) {
      const t0 = performance.now()
      yield* backend.compute(plan)
      walls.push((performance.now() - t0) * 1e3 / LAYERS)
    }
    return Number(median(walls).toFixed(2))
  }).pipe(Effect.scoped)

const chained = (form: string, D: number) =>
  Effect.gen(function*() {
    const row = D * HKV * 2
    const attention = yield* wallPerLayer(form, (g) =>
      Effect.gen(function*() {
        const q = yield* g.input("q", "f32", [D, 1, H])
        const mask = yield* g.input("mask", "f16", [KEYS, 1])
        const inputs = [q, mask]
        for (let l = 0; l < LAYERS; l++) {
          const kc = yield* g.input(`k${l}`, "f16", [D * HKV, KEYS])
          const vc = yield* g.input(`v${l}`, "f16", [D * HKV, KEYS])
          inputs.push(kc, vc)
          const k = yield* Tensor.view(kc, [D, KEYS, HKV], [row, D * 2, row * KEYS], 0)
          const v = yield* Tensor.view(vc, [D, KEYS, HKV], [row, D * 2, row * KEYS], 0)
          yield* g.output(Ops.flashAttnExt(q, k, v, { scale: 1 / Math.sqrt(D), mask }))
        }
        return inputs
      }))
    const adds = yield* wallPerLayer(form, (g) =>
      Effect.gen(function*() {
        const x = yield* g.input("x", "f32", [D * H])
        let y: Tensor.Tensor = x
        for (let l = 0; l < LAYERS; l++) y = yield* Ops.add(y, x)
        yield* g.output(y)
        return [x]
      }))
    console.log(JSON.stringify({ D, keys: KEYS, form, chain: true, attention_us: attention, add_us: adds }))
  })

Effect.runPromise(
  Effect.forEach([64, 128], (D) => Effect.forEach(forms, (form) => chain ? chained(form, D) : traced(form, D)), {
    discard: true
  })
).catch((e) => {
  console.error(e)
  process.exit(1)
})
