/**
 * Prompt attention alone (heads 32/8, D 128) at n_q = N over N keys (or --keys K): the one-pass forms given, traced (GPU time of
 * each dispatch, median of 20), in the bench's layout (q, K and V contiguous [D, N, heads]) and in a model's
 * (K and V windows of a cache whose rows hold every KV head, q a permuted [D, heads, N]), under a causal mask
 * and a dense one. It asks why an 8B prompt's attention in one pass (512 causal queries) ran at a fifth of
 * its rate at 2048 dense queries (benchmarks/RESULTS.md, run fl).
 *
 *   tsx prompt-attention-probe.ts [N...] [--keys K] [--forms one-pass:8:s1,one-pass] [--chain]
 *     [--layouts model,bench]
 *
 * (forms as bench/tilings.ts parsePrefillAttention reads them: SUBGROUPS and sSPLITS)
 */
import { Graph, Ops, Tensor } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { kernelTimes } from "../case.js"
import { parsePrefillAttention } from "../tilings.js"

const args = process.argv.slice(2)
const formsAt = args.indexOf("--forms")
const forms = formsAt >= 0 ? args[formsAt + 1].split(",") : ["one-pass:4:s1", "one-pass:8:s1", "one-pass"]
const withChain = args.includes("--chain")
const layoutsAt = args.indexOf("--layouts")
const layouts = (layoutsAt >= 0 ? args[layoutsAt + 1].split(",") : ["model", "bench"]) as Array<"model" | "bench">
const keysAt = args.indexOf("--keys")
const keysArg = keysAt >= 0 ? Number(args[keysAt + 1]) : undefined
const sizes = args.filter((a, i) => /^\d+$/.test(a) && (keysAt < 0 || i !== keysAt + 1)).map(Number)
const [H, HKV, D, REPS] = [32, 8, 128, 20]

/**
 * f16 bits of an n x keys mask: 0 where a query sees a key, -inf elsewhere (causal: the queries the last n
 * positions), or 0 everywhere
 */
const maskBits = (n: number, keys: number, causal: boolean) => {
  const bits = new Uint16Array(n * keys)
  if (causal) { for (let i = 0; i < n; i++) bits.fill(0xfc00, i * keys + keys - n + i + 1, (i + 1) * keys) }
  return new Uint8Array(bits.buffer)
}

const timed = (n: number, form: string, layout: "bench" | "model", causal: boolean, chain: boolean) =>
  Effect.gen(function*() {
    const nkv = keysArg ?? n
    const [device] = yield* WebGpu.make({ devices: 1, attentionPrefill: parsePrefillAttention(form) })
    const backend = yield* device.makeBackend()
    const g = Graph.make()
    const row = D * HKV * 2
    const qIn = yield* g.input("q", "f32", layout === "bench" ? [D, n, H] : [D, H, n])
    const kIn = yield* g.input("k", "f16", layout === "bench" ? [D, nkv, HKV] : [D * HKV, nkv])
    const vIn = yield* g.input("v", "f16", layout === "bench" ? [D, nkv, HKV] : [D * HKV, nkv])
    const mask = yield* g.input("mask", "f16", [nkv, n])
    const q = layout === "bench" ? qIn : yield* Ops.permute(qIn, [0, 2, 1, 3])
    const k = layout === "bench" ? kIn : yield* Tensor.view(kIn, [D, nkv, HKV], [row, D * 2, row * nkv], 0)
    const v = layout === "bench" ? vIn : yield* Tensor.view(vIn, [D, nkv, HKV], [row, D * 2, row * nkv], 0)
    const scale = 1 / Math.sqrt(D)
    if (chain) {
      const scores = yield* Ops.softMax(Ops.mulMat(k, q), { mask, scale })
      const vt = yield* Ops.cont(Ops.permute(v, [1, 0, 2, 3]))
      yield* g.output(Ops.mulMat(vt, scores))
    } else {
      yield* g.output(Ops.flashAttnExt(q, k, v, { scale, mask }))
    }
    const plan = yield* backend.allocate(backend.optimize(g.build()))
    yield* plan.set(qIn, Generators.values(1, D * H * n))
    yield* plan.set(kIn, Generators.values(2, D * HKV * nkv))
    yield* plan.set(vIn, Generators.values(3, D * HKV * nkv))
    yield* plan.setBytes(mask, maskBits(n, nkv, causal))
    const kernels = (yield* kernelTimes(backend, backend.compute(plan), REPS)).map(({ kernel, us }) => ({
      kernel,
      us: Number(us.toFixed(1))
    }))
    const total = kernels.reduce((s, k) => s + k.us, 0)
    // causal work counted as the keys each query sees
    const flops = 4 * D * H * n * (causal ? nkv - n + (n + 1) / 2 : nkv)
    console.log(JSON.stringify({
      n,
      keys: nkv,
      form: chain ? "chain" : form,
      layout,
      mask: causal ? "causal" : "dense",
      total_us: Number(total.toFixed(1)),
      tflops: Number((flops / total / 1e6).toFixed(1)),
      kernels
    }))
  }).pipe(Effect.scoped)

const cases = (sizes.length > 0 ? sizes : [512, 2048]).flatMap((n) =>
  layouts.flatMap((layout) =>
    [true, false].flatMap((causal) => [
      ...forms.map((form) => () => timed(n, form, layout, causal, false)),
      ...(withChain ? [() => timed(n, "one-pass", layout, causal, true)] : [])
    ])
  )
)
Effect.runPromise(Effect.forEach(cases, (c) => c(), { discard: true })).catch((e) => {
  console.error(e)
  process.exit(1)
})
