/**
 * Decode attention alone: one query over a model's cache (heads 32/8, 544 keys) for each head size, in the
 * decode forms given, traced (GPU time per dispatch, each in a timestamped pass of its own: ~5 us over an
 * untraced dispatch, the same for every form). A form is SPLITS:BLOCK:SUBGROUPS[:keys|dims] (the scores'
 * lanes across the keys or the head dimension), 0 keeping a default.
 *
 *   tsx attention-probe.ts [KEYS] [FORM...]     (default 544, the default form and a few others)
 */
import { Graph, Ops } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { parseAttention } from "../tilings.js"

const [keysArg, ...formArgs] = process.argv.slice(2)
const KEYS = Number(keysArg ?? 544)
const forms = formArgs.length > 0 ? formArgs : ["0:0:0", "0:0:0:dims", "10:0:0", "3:0:0", "0:0:2", "0:0:8"]
const [H, HKV, REPS] = [32, 8, 20]

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const probe = (form: string, D: number) =>
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
    for (let i = 0; i < 5; i++) yield* backend.compute(plan)
    const times = new Map<string, Array<number>>()
    for (let r = 0; r < REPS; r++) {
      const trace = yield* backend.captureNext
      yield* backend.compute(plan)
      for (const e of (yield* trace).entries) {
        const key = e.kernel.split("|")[0]
        times.set(key, [...(times.get(key) ?? []), (e.gpuTimeNs ?? 0) / 1e3])
      }
    }
    const kernels = [...times.entries()].map(([kernel, us]) => ({ kernel, us: Number(median(us).toFixed(2)) }))
    console.log(JSON.stringify({ D, keys: KEYS, form, total_us: kernels.reduce((s, k) => s + k.us, 0), kernels }))
  }).pipe(Effect.scoped)

Effect.runPromise(
  Effect.forEach([64, 128], (D) => Effect.forEach(forms, (form) => probe(form, D)), { discard: true })
).catch((e) => {
  console.error(e)
  process.exit(1)
})
