/**
 * The llama-family models of issue 20 at real shapes, random weights, on the best device: prefill of 512
 * tokens, and decode of 128 tokens after a 512-token prompt, in tok/s (best of 3 after a warm-up run).
 * Prints one JSON line per model, and the bandwidth fraction of decode (model bytes x tok/s / 4.8 TB/s).
 *
 *   tsx llm.ts models DIR [NAME...]      write the models (tiled random weights; seconds, not minutes)
 *   tsx llm.ts run DIR [NAME...]         measure them (names: 1b-f16 1b-q8_0 1b-q4_0 8b-q8_0 8b-q4_0; also
 *                                        1b-q4_K 8b-q4_K 1b-q4_K_M 8b-q4_K_M)
 *   tsx llm.ts run DIR --quick           a small model (lavapipe: checks the path, not the speed)
 *   tsx llm.ts run DIR NAME --profile    also one decoding step's dispatches: GPU time per op, and the wall time
 *   tsx llm.ts run DIR NAME --profile --prefill   the same for the prompt (--shapes: products by result shape)
 *   tsx llm.ts run DIR NAME --attention-splits N   attention's decode form with the keys in N splits
 *   tsx llm.ts run DIR NAME --attention-lanes keys|keys1|dims   its scores' lanes across the keys (keys1: a
 *                                        lane a key, not four) or the head dimension
 *   tsx llm.ts run DIR NAME --attention-subgroups N   its subgroups a workgroup
 *   tsx llm.ts run DIR NAME --attention-heads N   its query heads a workgroup
 *   tsx llm.ts run DIR NAME --row-threads N   invocations of a row kernel's workgroup (norms, soft_max)
 *   tsx llm.ts run DIR NAME --attention fused|chain|auto   attention's form (Forward.Options.attention)
 *   tsx llm.ts run DIR NAME --projections stacked|apart|auto   a prompt's q/k/v as one product or three
 *                                                 (Forward.Options.projections)
 *   tsx llm.ts run DIR NAME --prefill-only   prompts only (no decoding runs: an A/B of a prompt's forms)
 *   tsx llm.ts run DIR NAME --timeline   a decoding step's host events (writes, submits, waits) untraced
 *   tsx llm.ts run DIR NAME --f32-decode   q4_0 and q8_0 decode without the int8 form (to compare)
 *   tsx llm.ts run DIR NAME --norm-tree   a product's own norm reduced by a tree, not by subgroup sums
 *   tsx llm.ts run DIR NAME --mv-rows N   rows a subgroup of the int8 form owns (default 2)
 *   tsx llm.ts run DIR NAME --mv-groups N   the int8 form's workgroups at most N, each taking row groups in turn (0: none)
 *   tsx llm.ts run DIR NAME --norm-twice   a norm the int8 products make read for its scale, then again
 *                                                 as b is rounded (default: read once)
 *   tsx llm.ts run DIR NAME --mv-split N   the int8 form's K split over workgroups of at most N values each
 *                                                 where its grid is small (default: no split)
 *   tsx llm.ts run DIR NAME --mv-split-below N   ... where its grid has fewer than N workgroups (default 1024)
 *   tsx llm.ts run DIR NAME --toggles skip_validation   extra Dawn toggles (after the defaults)
 *   tsx llm.ts run DIR NAME --robustness   Dawn's bounds checks on (default off: WebGpu.Options.robustness)
 *   tsx llm.ts run DIR NAME --f32-activations      a prompt's activations kept f32 (f16 for products on subgroup
 *                                                 matrices by default)
 *   tsx llm.ts run DIR NAME --apart-stores   a layer's keys and values stored by two dispatches (default: one,
 *                                                 rope_set_rows_kv)
 *   tsx llm.ts run DIR NAME --stores-apart   a layer's keys and values stored by their own dispatch (default: by
 *                                                 the q/k/v stack that computes them)
 *   tsx llm.ts run DIR NAME --norms-apart   a decoding step's norms by dispatches of their own (default: by the
 *                                                 int8 products that read them, for hidden sizes up to 4096)
 *   tsx llm.ts run DIR NAME --norms-in-products   the same at every hidden size
 *   tsx llm.ts run DIR NAME --merges-apart   decode attention's splits merged by a dispatch of their own (default:
 *                                                 by the output projection that reads them, for outputs up to 2048)
 *   tsx llm.ts run DIR NAME --merges-in-products   the same at every size (the 8B shapes too)
 *   tsx llm.ts run DIR NAME --copy-loads words|vec4|ahead   how the f16 copy of q4_0 / q8_0 weights stages its runs
 *   tsx llm.ts run DIR NAME --values-after   decode attention's V rows loaded after the scores (default: with K's)
 *   tsx llm.ts run DIR NAME --copy-shape VECS:STORES   the copy's vec4s a thread (4, 8, 16) and stores (half4, wide)
 *   tsx llm.ts run DIR NAME --swiglu-apart   a prompt's gate and up products and their swiglu apart (default:
 *                                            one product with the register-tiled and scalar tiles)
 *   tsx llm.ts run DIR NAME --sums-apart   a prompt's residual sums by adds of their own (default: made by the
 *                                          norms reading them, stored over the stream)
 *   tsx llm.ts run DIR NAME --permuted-apart   a product read by a permuted copy stored as it is, then copied
 *                                              (default: stored in the copy's layout by the product itself)
 *   tsx llm.ts run DIR NAME --query-ropes-apart   a prompt's q roped by a dispatch of its own (default: by
 *                                                 its layer's key and value store)
 *   tsx llm.ts run DIR NAME --splits-apart   a split-K product's partial sums added by its merge dispatch
 *                                            (default: by the norm reading them, where one does next)
 *   tsx llm.ts run DIR NAME --prefill-subgroups N   prompt attention in one pass: subgroups (16 query rows each) a
 *                                                  workgroup (default: 8 where that gives 256 workgroups, else 4)
 *   tsx llm.ts run DIR NAME --prefill-splits N   prompt attention in one pass: its keys split over N workgroups a
 *                                              query block (default: as many as bring its workgroups to 256)
 *   tsx llm.ts run DIR NAME --steps-ahead N   greedy decoding's steps queued past the token awaited (default 1)
 *   tsx llm.ts run DIR NAME --q-prefill tiles|copy   a quantized prompt product's weights dequantized in its
 *                                                 tiles or copied into f16 first (default: the copy from 256 columns)
 */
import { Registry } from "@effect-gpu/core"
import { Fixture, Llm } from "@effect-gpu/llm"
import { WebGpu } from "@effect-gpu/webgpu"
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

const llama1b = { hidden: 2048, layers: 16, heads: 32, kvHeads: 8, ffn: 8192, vocab: 32000 } as const
const llama8b = { hidden: 4096, layers: 32, heads: 32, kvHeads: 8, ffn: 14336, vocab: 128256 } as const
const quick = { hidden: 256, layers: 2, heads: 4, kvHeads: 2, ffn: 512, vocab: 1000 } as const
/** a 1B model's layers and dispatches at small widths: its step's host work on a slow adapter */
const host = { hidden: 256, layers: 16, heads: 8, kvHeads: 2, ffn: 512, vocab: 32000 } as const

const kMix = { attn_v: "q6_K", ffn_down: "q6_K", output: "q6_K" } as const

const MODELS: Record<string, Fixture.Options> = {
  "1b-f16": { architecture: "llama", dtype: "f16", ...llama1b },
  "1b-q8_0": { architecture: "llama", dtype: "q8_0", ...llama1b },
  "1b-q4_0": { architecture: "llama", dtype: "q4_0", ...llama1b },
  "8b-q8_0": { architecture: "llama", dtype: "q8_0", ...llama8b },
  "8b-q4_0": { architecture: "llama", dtype: "q4_0", ...llama8b },
  // k-quant models, not in issue 20's table: every matrix q4_K, and a mix as llama.cpp's Q4_K_M (what most
  // published models use) has it, attn_v, ffn_down and the head in q6_K
  "1b-q4_K": { architecture: "llama", dtype: "q4_K", ...llama1b },
  "8b-q4_K": { architecture: "llama", dtype: "q4_K", ...llama8b },
  "1b-q4_K_M": { architecture: "llama", dtype: "q4_K", ...llama1b, types: kMix },
  "8b-q4_K_M": { architecture: "llama", dtype: "q4_K", ...llama8b, types: kMix },
  quick: { architecture: "llama", dtype: "q8_0", ...quick },
  "host-q4_0": { architecture: "llama", dtype: "q4_0", ...host }
}

const PROMPT = 512
const DECODE = 128
const HBM = 4.8e12

const [command, dir, ...rest] = process.argv.slice(2)
const valued = [
  "--attention-splits",
  "--attention",
  "--toggles",
  "--attention-lanes",
  "--attention-subgroups",
  "--attention-heads",
  "--row-threads",
  "--q-prefill",
  "--projections",
  "--copy-loads",
  "--copy-shape",
  "--steps-ahead",
  "--mv-rows",
  "--mv-groups",
  "--mv-split",
  "--mv-split-below",
  "--prefill-subgroups",
  "--prefill-splits",
  "--matrix-order",
  "--register-order"
]
const names = rest.filter((n, i) => !n.startsWith("--") && !valued.includes(rest[i - 1]))
const attentionAt = rest.indexOf("--attention")
const attention = attentionAt >= 0 ? rest[attentionAt + 1] as "fused" | "chain" | "auto" : undefined
const projectionsAt = rest.indexOf("--projections")
const projections = projectionsAt >= 0 ? rest[projectionsAt + 1] as "stacked" | "apart" | "auto" : undefined
const chosen = rest.includes("--quick")
  ? ["quick"]
  : names.length > 0
  ? names
  : ["1b-f16", "1b-q8_0", "1b-q4_0", "8b-q8_0", "8b-q4_0"]
for (const n of chosen) {
  if (MODELS[n] === undefined) {
    console.error(`unknown model ${n}: ${Object.keys(MODELS).join(", ")}`)
    process.exit(2)
  }
}
if ((command !== "models" && command !== "run") || dir === undefined) {
  console.error("usage: tsx llm.ts models|run DIR [NAME...] [--quick]")
  process.exit(2)
}
const file = (name: string) => path.join(dir, `${name}.gguf`)
const splitsAt = rest.indexOf("--attention-splits")
const lanesAt = rest.indexOf("--attention-lanes")
const subgroupsAt = rest.indexOf("--attention-subgroups")
const headsAt = rest.indexOf("--attention-heads")
const rowThreadsAt = rest.indexOf("--row-threads")
const attentionDecode = {
  ...(headsAt >= 0 ? { heads: Number(rest[headsAt + 1]) } : {}),
  ...(subgroupsAt >= 0 ? { subgroups: Number(rest[subgroupsAt + 1]) } : {}),
  ...(splitsAt >= 0 ? { splits: Number(rest[splitsAt + 1]) } : {}),
  ...(lanesAt >= 0 ? { across: rest[lanesAt + 1] === "dims" ? "dims" as const : "keys" as const } : {}),
  ...(lanesAt >= 0 && rest[lanesAt + 1] === "keys1" ? { keyLanes: 1 } : {}),
  ...(rest.includes("--values-after") ? { valuesAhead: false } : {})
}
// the matrix-vector forms' overrides (the defaults' rows and columns where any is asked)
const decodeForms = {
  ...(rest.includes("--f32-decode") ? { int8: false } : {}),
  ...(rest.includes("--mv-rows") ? { int8Rows: Number(rest[rest.indexOf("--mv-rows") + 1]) } : {}),
  ...(rest.includes("--mv-groups") ? { int8Groups: Number(rest[rest.indexOf("--mv-groups") + 1]) } : {}),
  ...(rest.includes("--norm-twice") ? { normOnce: false } : {}),
  ...(rest.includes("--mv-split") ? { int8Split: Number(rest[rest.indexOf("--mv-split") + 1]) } : {}),
  ...(rest.includes("--mv-split-below")
    ? { int8SplitBelow: Number(rest[rest.indexOf("--mv-split-below") + 1]) }
    : {})
}
const quantizedDecode = Object.keys(decodeForms).length > 0 ? { rows: 2, columns: 8, ...decodeForms } : undefined
const gpuOptions = {
  ...(Object.keys(attentionDecode).length > 0 ? { attentionDecode } : {}),
  ...(rest.includes("--prefill-subgroups") || rest.includes("--prefill-splits")
    ? {
      attentionPrefill: {
        ...(rest.includes("--prefill-subgroups")
          ? { subgroups: Number(rest[rest.indexOf("--prefill-subgroups") + 1]) }
          : {}),
        ...(rest.includes("--prefill-splits") ? { splits: Number(rest[rest.indexOf("--prefill-splits") + 1]) } : {})
      }
    }
    : {}),
  ...(quantizedDecode !== undefined ? { quantizedDecode } : {}),
  ...(rest.includes("--f32-activations") ? { halfActivations: false } : {}),
  ...(rest.includes("--norm-tree") ? { normReduce: "tree" as const } : {}),
  ...(rest.includes("--apart-stores") ? { storeValuesWithKeys: false } : {}),
  ...(rest.includes("--stores-apart") ? { storeKeysInProducts: false } : {}),
  ...(rest.includes("--norms-apart") ? { normsInProducts: false } : {}),
  ...(rest.includes("--norms-in-products") ? { normsInProducts: true } : {}),
  ...(rest.includes("--merges-apart") ? { mergesInProducts: false } : {}),
  ...(rest.includes("--merges-in-products") ? { mergesInProducts: true } : {}),
  ...(rest.includes("--copy-loads")
    ? { copyLoads: rest[rest.indexOf("--copy-loads") + 1] as "words" | "vec4" | "ahead" }
    : {}),
  ...(rest.includes("--copy-shape")
    ? {
      copyShape: ((vecs, stores) => ({ vecs: Number(vecs) as 4 | 8 | 16, stores: stores as "half4" | "wide" }))(
        ...rest[rest.indexOf("--copy-shape") + 1].split(":") as [string, string]
      )
    }
    : {}),
  ...(rest.includes("--swiglu-apart") ? { gatedPrompts: false } : {}),
  ...(rest.includes("--sums-apart") ? { sumsInNorms: false } : {}),
  ...(rest.includes("--permuted-apart") ? { permutedResults: false } : {}),
  ...(rest.includes("--splits-apart") ? { splitsInNorms: false } : {}),
  ...(rest.includes("--query-ropes-apart") ? { queryRopesInStores: false } : {}),
  ...(rowThreadsAt >= 0 ? { rowThreads: Number(rest[rowThreadsAt + 1]) } : {}),
  ...(rest.includes("--q-prefill")
    ? { quantizedPrefill: rest[rest.indexOf("--q-prefill") + 1] as "tiles" | "copy" }
    : {}),
  ...(rest.includes("--toggles")
    ? { toggles: [...WebGpu.defaultToggles, ...rest[rest.indexOf("--toggles") + 1].split(",")] }
    : {}),
  ...(rest.includes("--robustness") ? { robustness: true } : {}),
  ...(rest.includes("--no-fill-tiles") ? { fillTiles: false } : {}),
  ...(rest.includes("--no-subgroup-matrices") ? { subgroupMatrices: false } : {}),
  ...(rest.includes("--register-order")
    ? { registerOrder: rest[rest.indexOf("--register-order") + 1] as "rows" | "columns" }
    : {}),
  ...(rest.includes("--matrix-order")
    ? { matrixOrder: rest[rest.indexOf("--matrix-order") + 1] as "rows" | "columns" }
    : {})
}

if (command === "models") {
  fs.mkdirSync(dir, { recursive: true })
  for (const name of chosen) {
    const started = performance.now()
    const fd = fs.openSync(file(name), "w")
    const bytes = Fixture.write(MODELS[name], (b) => fs.writeSync(fd, b), { tile: 1 << 18 })
    fs.closeSync(fd)
    console.error(`${name}: ${(bytes / 1e9).toFixed(2)} GB in ${((performance.now() - started) / 1000).toFixed(1)} s`)
  }
  process.exit(0)
}

/** seeded token ids past the byte tokens */
const tokens = (n: number, vocab: number, seed: number) => {
  let a = seed
  return Array.from({ length: n }, () => {
    a = (Math.imul(a, 1103515245) + 12345) >>> 0
    return 300 + (a % (vocab - 300))
  })
}

const measure = (name: string) =>
  Effect.gen(function*() {
    const device = yield* Registry.bestDevice
    const loadStart = performance.now()
    const model = yield* Llm.load(file(name), {
      device,
      size: PROMPT + DECODE + 64,
      ubatch: PROMPT,
      ...(attention !== undefined ? { attention } : {}),
      ...(projections !== undefined ? { projections } : {}),
      ...(rest.includes("--steps-ahead") ? { stepsAhead: Number(rest[rest.indexOf("--steps-ahead") + 1]) } : {})
    })
    const loadS = (performance.now() - loadStart) / 1000
    const prompt = tokens(PROMPT, model.hyperparameters.vocab, 7)
    // prompts for a second after the first (plans and pipelines): the GPU's clock climbs over the first few
    // (RESULTS.md's setup says how long), then three timed
    const prefill: Array<number> = []
    let warmStart = Infinity
    for (let run = 0; run < 4 || performance.now() - warmStart < 1000; run++) {
      if (run === 1) warmStart = performance.now()
      yield* model.context.truncate(0)
      const t0 = performance.now()
      yield* model.context.evaluate(prompt)
      prefill.push(PROMPT / ((performance.now() - t0) / 1000))
    }
    prefill.splice(0, prefill.length - 4)
    const decode: Array<number> = []
    for (let run = 0; run < (rest.includes("--prefill-only") ? 0 : 4); run++) {
      // a different first token each run: the prompt's positions are evaluated again
      const p = [run + 1, ...prompt.slice(1)]
      let first = 0
      let count = 0
      yield* Stream.runForEach(
        model.generate(p, { temperature: 0, maxTokens: DECODE + 1, ignoreEndOfGeneration: true }),
        () => Effect.sync(() => (count++ === 0 ? first = performance.now() : 0))
      )
      decode.push(DECODE / ((performance.now() - first) / 1000))
    }
    // the first of each is a warm-up (plans, pipelines, clocks)
    const best = (xs: ReadonlyArray<number>) => xs.length === 0 ? NaN : Math.max(...xs.slice(1))
    const result = {
      model: name,
      attention: attention ?? "default",
      prefill_subgroups: gpuOptions.attentionPrefill?.subgroups ?? "auto",
      prefill_splits: gpuOptions.attentionPrefill?.splits ?? "auto",
      projections: projections ?? "auto",
      q_prefill: gpuOptions.quantizedPrefill ?? "default",
      stores: gpuOptions.storeValuesWithKeys === false
        ? "apart"
        : gpuOptions.storeKeysInProducts === false
        ? "kv"
        : "stack",
      norms: gpuOptions.normsInProducts === false ? "apart" : gpuOptions.normsInProducts === true ? "products" : "auto",
      merges: gpuOptions.mergesInProducts === false
        ? "apart"
        : gpuOptions.mergesInProducts === true
        ? "products"
        : "auto",
      copy_loads: gpuOptions.copyLoads ?? "ahead",
      copy_shape: `${gpuOptions.copyShape?.vecs ?? 4}:${gpuOptions.copyShape?.stores ?? "half4"}`,
      gated: gpuOptions.gatedPrompts === false ? "none" : "default",
      sums: gpuOptions.sumsInNorms === false ? "apart" : "norms",
      permuted: gpuOptions.permutedResults === false ? "apart" : "products",
      splits: gpuOptions.splitsInNorms === false ? "merged" : "norms",
      query_ropes: gpuOptions.queryRopesInStores === false ? "apart" : "stores",
      decode_values: attentionDecode.valuesAhead === false ? "after" : "ahead",
      norm_reduce: gpuOptions.normReduce ?? "auto",
      mv_rows: gpuOptions.quantizedDecode?.int8Rows ?? 2,
      mv_groups: gpuOptions.quantizedDecode?.int8Groups ?? "auto",
      norm_once: gpuOptions.quantizedDecode?.normOnce !== false,
      robustness: gpuOptions.robustness === true,
      matrix_order: gpuOptions.matrixOrder ?? "columns",
      fill_tiles: gpuOptions.fillTiles !== false,
      subgroup_matrices: gpuOptions.subgroupMatrices !== false,
      register_order: gpuOptions.registerOrder ?? "rows",
      mv_split: gpuOptions.quantizedDecode?.int8Split ?? "none",
      mv_split_below: gpuOptions.quantizedDecode?.int8SplitBelow ?? 1024,
      steps_ahead: rest.includes("--steps-ahead") ? Number(rest[rest.indexOf("--steps-ahead") + 1]) : 1,
      device: device.name,
      bytes: model.bytes,
      load_s: Number(loadS.toFixed(2)),
      prefill_tok_s: Number(best(prefill).toFixed(1)),
      decode_tok_s: Number(best(decode).toFixed(1)),
      decode_bandwidth_fraction: Number(((model.bytes * best(decode)) / HBM).toFixed(3)),
      runs: { prefill: prefill.map((x) => Number(x.toFixed(1))), decode: decode.map((x) => Number(x.toFixed(1))) }
    }
    console.log(JSON.stringify(result))
    if (rest.includes("--timeline")) {
      // a decoding step untraced, its host events timed: Dawn's entry points wrapped where they are
      // called (writes, encoding, submits, completions, maps), 8 steps after a warm-up
      const events: Array<[string, number]> = []
      const wrap = (proto: any, name: string, label = name) => {
        const original = proto[name]
        proto[name] = function(this: unknown, ...args: Array<unknown>) {
          events.push([`${label}>`, performance.now()])
          const r = original.apply(this, args)
          events.push([`${label}<`, performance.now()])
          if (r instanceof Promise) r.then(() => events.push([`${label} resolved`, performance.now()]))
          return r
        }
        return () => (proto[name] = original)
      }
      // the pass encoder's calls summed, not listed (a step makes hundreds): their share of the host time
      const inPass = { ms: 0, calls: 0 }
      const sum = (proto: any, name: string) => {
        const original = proto[name]
        proto[name] = function(this: unknown, ...args: Array<unknown>) {
          const t = performance.now()
          const r = original.apply(this, args)
          inPass.ms += performance.now() - t
          inPass.calls++
          return r
        }
        return () => (proto[name] = original)
      }
      const g = globalThis as any
      const steps: Array<Array<[string, number]>> = []
      const passMs: Array<number> = []
      for (let step = 0; step < 9; step++) {
        yield* model.context.truncate(PROMPT)
        const undo = [
          wrap(g.GPUQueue.prototype, "submit"),
          wrap(g.GPUQueue.prototype, "writeBuffer"),
          wrap(g.GPUQueue.prototype, "onSubmittedWorkDone"),
          wrap(g.GPUBuffer.prototype, "mapAsync"),
          wrap(g.GPUDevice.prototype, "createBuffer"),
          wrap(g.GPUDevice.prototype, "createCommandEncoder"),
          ...["setPipeline", "setBindGroup", "dispatchWorkgroups", "end"].map((n) =>
            sum(g.GPUComputePassEncoder.prototype, n)
          ),
          sum(g.GPUCommandEncoder.prototype, "finish")
        ]
        events.length = 0
        inPass.ms = 0
        inPass.calls = 0
        const t0 = performance.now()
        events.push(["evaluate>", t0])
        yield* model.context.evaluate([prompt[0]])
        events.push(["evaluate<", performance.now()])
        for (const u of undo) u()
        if (step > 0) {
          steps.push(events.map(([e, t]) => [e, Number((t - t0).toFixed(3))]))
          passMs.push(Number(inPass.ms.toFixed(3)))
        }
      }
      // the step with the median wall time
      steps.sort((a, b) => a[a.length - 1][1] - b[b.length - 1][1])
      console.log(JSON.stringify({
        model: name,
        timeline: "one decoding step at position 512, untraced: ms from its start",
        walls_ms: steps.map((s) => s[s.length - 1][1]),
        // the time inside the pass encoders' calls (setPipeline, setBindGroup, dispatchWorkgroups, end, finish)
        // during each step, in the steps' order (encoding ahead for the next one included)
        pass_calls_ms: passMs,
        events: steps[Math.floor(steps.length / 2)]
      }))
    }
    if (rest.includes("--profile")) {
      // one decoding step at position 512 (or with --prefill the prompt), traced: the GPU's time per op
      // against the step's wall time
      const prefillStep = rest.includes("--prefill")
      yield* model.context.truncate(prefillStep ? 0 : PROMPT)
      const trace = yield* model.context.backend.captureNext
      const t0 = performance.now()
      yield* model.context.evaluate(prefillStep ? prompt : [prompt[0]])
      const wallMs = performance.now() - t0
      const entries = (yield* trace).entries
      const byOp = new Map<string, { count: number; gpuMs: number }>()
      for (const e of entries) {
        // products apart by their result's shape (--shapes): which of them fill the GPU
        const shape = rest.includes("--shapes") && e.op.startsWith("mul_mat") ? ` [${e.ne.join(",")}]` : ""
        const key = `${e.op}:${e.kernel.split(":")[0]}${shape}`
        const row = byOp.get(key) ?? { count: 0, gpuMs: 0 }
        row.count++
        row.gpuMs += (e.gpuTimeNs ?? 0) / 1e6
        byOp.set(key, row)
      }
      const gpuMs = entries.reduce((s, e) => s + (e.gpuTimeNs ?? 0) / 1e6, 0)
      console.log(JSON.stringify({
        model: name,
        profile: `${prefillStep ? "the 512-token prompt" : "one decoding step"} (traced, so slower than untraced)`,
        dispatches: entries.length,
        wall_ms: Number(wallMs.toFixed(2)),
        gpu_ms: Number(gpuMs.toFixed(2)),
        // the encoding's host time (each dispatch in its own timestamped pass)
        host_ms: Number(entries.reduce((s, e) => s + (e.hostTimeMs ?? 0), 0).toFixed(2)),
        ops: [...byOp.entries()].sort((a, b) => b[1].gpuMs - a[1].gpuMs).map(([op, r]) => ({
          op,
          count: r.count,
          gpu_ms: Number(r.gpuMs.toFixed(3))
        }))
      }))
    }
  }).pipe(Effect.scoped)

Effect.runPromise(
  Effect.forEach(chosen, measure, { discard: true }).pipe(
    // a GPU run needs the GPU: no adapter fails (--quick may fall back to the CPU)
    Effect.provide(
      Layer.merge(
        rest.includes("--quick") ? WebGpu.layerOrCpu(gpuOptions) : WebGpu.layer(gpuOptions),
        NodeContext.layer
      )
    )
  )
).catch((e) => {
  console.error(e)
  process.exit(1)
})
