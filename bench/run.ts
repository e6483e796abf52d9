/**
 * Benchmarks: each case on our WebGPU backend and on tfjs-backend-webgpu 4.22, on the same Dawn adapter in
 * the same process. Median of --runs timed runs after warm-up, on fresh seeded non-zero inputs; a run is
 * submit + wait for the GPU (no readback) on both sides. Prints a table and writes JSON to benchmarks/.
 *
 *   pnpm bench --help                   # these lines; a bad option, case or number exits 2 with a message
 *   pnpm bench                          # every case at full size (for a real GPU)
 *   pnpm bench --quick                  # small sizes (lavapipe)
 *   pnpm bench --cases matmul,add --runs 20 --label h200
 *   pnpm bench --cases matmul,add --sizes 1024,3000 --elements 1000000   # other sizes
 *   pnpm bench --cases matmul_f16 --no-peer --tile 2x4:4x2:64   # a subgroup-matrix tiling
 *   pnpm bench --cases matmul --regs 8x8:8                        # a register tiling of the f32 kernel
 *   pnpm bench --cases transformer_block --profile                # each dispatch's kernel and GPU time
 *   pnpm bench --cases matmul --toggles disable_robustness        # extra Dawn toggles for a run
 *   pnpm bench --cases matmul,transformer_block --own-params      # weights in buffers of their own
 *   pnpm bench --cases matmul,transformer_block --no-leaf-buffer  # inputs and weights in the compute buffer
 *   pnpm bench --cases flash_attn_prefill --no-peer --fa-prefill one-pass:4:no-prefetch   # a prompt attention form
 *   pnpm bench --cases flash_attn_decode --no-peer --fa 16:0:4   # a decode attention form (SPLITS:BLOCK:SUBGROUPS...)
 *   pnpm bench --cases prefill_q4_0 --no-peer --q-prefill tiles   # quantized weights dequantized in the tiles (or: copy)
 *   pnpm bench --cases mv_q8_0 --no-peer --qdecode 2:8:s2048   # the int8 decode form's K in splits of 2048 at most
 *
 * Each case warms up until its speed settles: the H200's SM clock idles low and climbs over seconds.
 */
import type { Backend, Graph, Tensor } from "@effect-gpu/core"
import { Ops } from "@effect-gpu/core"
import * as Generators from "@effect-gpu/testing/Generators"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import type * as TfCore from "@tensorflow/tfjs-core"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parseArgs } from "node:util"
import type { Case, Work } from "./case.js"
import { prepare } from "./case.js"
import { openDawn } from "./dawn.js"
import { modelCases } from "./models.js"
import {
  parseAttention,
  parseDecode,
  parseOrder,
  parsePrefillAttention,
  parseQuantizedPrefill,
  parseRegs,
  parseTile
} from "./tilings.js"

/** the usage: this file's header */
const usage = () => {
  const text = fs.readFileSync(new URL(import.meta.url), "utf8")
  return (/\/\*\*([\s\S]*?)\*\//.exec(text)?.[1] ?? "").split("\n").map((l) => l.replace(/^ \* ?/, "")).join("\n")
}

/** a bad command line: says what is wrong and how to get help, and exits 2 */
const fail = (message: string): never => {
  process.stderr.write(`bench: ${message}\n(--help lists the options)\n`)
  process.exit(2)
}

const parsed = (() => {
  try {
    return parseArgs({
      allowNegative: true,
      options: {
        cases: { type: "string" },
        runs: { type: "string", default: "10" },
        quick: { type: "boolean", default: false },
        label: { type: "string", default: "local" },
        peer: { type: "boolean", default: true },
        /** subgroup-matrix tiling of f16 mul_mat, "SRxSC:FRxFC:DEPTH" (subgroups, fragments per subgroup, K step) */
        tile: { type: "string" },
        /** which result tiles neighbouring workgroups of a subgroup-matrix product take: "rows" or "columns" */
        "matrix-order": { type: "string" },
        /** the same for the register-tiled (vec4) kernel */
        "register-order": { type: "string" },
        /** square matmul sizes (f32 and f16), comma-separated; default 256..8192 (--quick: 64..256) */
        sizes: { type: "string" },
        /** elements of the add and mul cases */
        elements: { type: "string" },
        /** rows of 4096 for soft_max and rms_norm */
        rows: { type: "string" },
        /** print each dispatch of our side's last captured run: kernel and GPU time */
        profile: { type: "boolean", default: false },
        /** register tiling of the vec4 mul_mat kernel, "MxN:DEPTH[u]" (results per thread, K step, unrolled) */
        regs: { type: "string" },
        /** the quantized matrix-vector kernel's shape, "ROWS:COLUMNS[:STAGE]" */
        qdecode: { type: "string" },
        /** flash attention's decode form, "SPLITS:BLOCK:SUBGROUPS[:keys|dims]" (0 keeps a default) */
        fa: { type: "string" },
        /** flash attention's matrix form for prompts, "one-pass|two-pass[:SUBGROUPS]" */
        "fa-prefill": { type: "string" },
        /** a quantized prompt product's weights: "tiles" (dequantized as staged) or "copy" (into f16 first) */
        "q-prefill": { type: "string" },
        /** Dawn toggles to enable besides the defaults, comma-separated (e.g. disable_robustness) */
        toggles: { type: "string" },
        /**
         * each param (weight) in a buffer of its own, as ggml keeps a model's weights apart from the compute
         * buffer (and tfjs gives every tensor its own): kernels then bind weights read-only
         */
        "own-params": { type: "boolean", default: false },
        /** the graph's leafs in a buffer of their own (default: the backend's, on for WebGPU) */
        "leaf-buffer": { type: "boolean" },
        out: { type: "string" },
        help: { type: "boolean", short: "h", default: false }
      }
    })
  } catch (e) {
    return fail(e instanceof Error ? e.message : String(e))
  }
})()
const args = parsed.values
if (args.help === true) {
  process.stdout.write(usage())
  process.exit(0)
}
/** an option's value parsed, or the command line failed with the parser's message */
const checked = <A>(parse: () => A): A => {
  try {
    return parse()
  } catch (e) {
    return fail(e instanceof Error ? e.message : String(e))
  }
}
if (parsed.positionals.length > 0) fail(`unexpected arguments: ${parsed.positionals.join(" ")}`)
if (!/^\d+$/.test(args.runs)) fail(`--runs takes a whole number, got ${args.runs}`)
const RUNS = Math.max(10, Number(args.runs))
const quick = args.quick === true
const wanted = args.cases?.split(",")

type Tf = typeof TfCore

const prepared = (backend: Backend.Backend, build: (g: Graph.Builder) => Effect.Effect<void, unknown>) =>
  prepare(backend, build, {
    ownParams: args["own-params"] === true,
    ...(args["leaf-buffer"] === undefined ? {} : { leafBuffer: args["leaf-buffer"] })
  })

const mm = (M: number, N: number, K: number, dtype: "f32" | "f16"): Case => ({
  name: dtype === "f32" ? "matmul" : "matmul_f16",
  size: `${M}x${N}x${K}`,
  work: { flops: 2 * M * N * K, dtype },
  ours: (_, backend) =>
    prepared(backend, (g) =>
      Effect.gen(function*() {
        const a = yield* g.param("a", dtype, [K, M])
        const b = yield* g.input("b", dtype, [K, N])
        yield* g.output(Ops.mulMat(a, b))
      })),
  ...(dtype === "f32"
    ? {
      peer: (tf: Tf) => {
        const a = tf.tensor2d(Generators.values(1, M * K), [M, K])
        const b = tf.tensor2d(Generators.values(2, N * K), [N, K])
        return () => tf.matMul(b, a, false, true).dispose()
      }
    }
    : {})
})

const elementwise = (op: "add" | "mul", n: number): Case => ({
  name: op,
  size: `${n}`,
  work: { bytes: 3 * 4 * n },
  ours: (_, backend) =>
    prepared(backend, (g) =>
      Effect.gen(function*() {
        const a = yield* g.input("a", "f32", [n])
        const b = yield* g.input("b", "f32", [n])
        yield* g.output(op === "add" ? Ops.add(a, b) : Ops.mul(a, b))
      })),
  peer: (tf) => {
    const a = tf.tensor1d(Generators.values(1, n))
    const b = tf.tensor1d(Generators.values(2, n))
    return () => (op === "add" ? tf.add(a, b) : tf.mul(a, b)).dispose()
  }
})

const rows = (op: "soft_max" | "rms_norm", rowsN: number, width: number): Case => ({
  name: op,
  size: `${rowsN}x${width}`,
  work: { bytes: 2 * 4 * rowsN * width },
  ours: (_, backend) =>
    prepared(backend, (g) =>
      Effect.gen(function*() {
        const a = yield* g.input("a", "f32", [width, rowsN])
        yield* g.output(op === "soft_max" ? Ops.softMax(a) : Ops.rmsNorm(a, 1e-6))
      })),
  peer: (tf) => {
    const a = tf.tensor2d(Generators.values(1, rowsN * width), [rowsN, width])
    return op === "soft_max"
      ? () => tf.softmax(a).dispose()
      : () =>
        tf.tidy(() => tf.mul(a, tf.rsqrt(tf.add(tf.mean(tf.square(a), -1, true), 1e-6))))
          .dispose()
  }
})

const manyNodes = (nodes: number): Case => ({
  name: `graph_${nodes}`,
  size: `${nodes} nodes`,
  work: { nodes },
  ours: (_, backend) =>
    prepared(backend, (g) =>
      Effect.gen(function*() {
        const x = yield* g.input("x", "f32", [256])
        const c = yield* g.input("c", "f32", [256])
        let t: Tensor.Tensor = x
        for (let i = 0; i < nodes; i++) t = yield* (i % 2 === 0 ? Ops.add(t, c) : Ops.mul(t, c))
        yield* g.output(t)
      })),
  peer: (tf) => {
    const x = tf.tensor1d(Generators.values(1, 256))
    const c = tf.tensor1d(Generators.values(2, 256))
    return () =>
      tf.tidy(() => {
        let t = x
        for (let i = 0; i < nodes; i++) t = i % 2 === 0 ? tf.add(t, c) : tf.mul(t, c)
        return t
      }).dispose()
  }
})

/** one pre-norm transformer block: attention (causal, nh heads) and a SwiGLU MLP */
/**
 * Decode through `layers` matrix-vector products in a row (each layer's output feeds the next), as a
 * token's step through a model's projections: one compute of many dependent dispatches, so the
 * per-run fixed cost is shared and the rate shows the kernels' memory bandwidth.
 */
const decodeChain = (layers: number, H: number): Case => ({
  name: "decode_chain",
  size: `${layers} x ${H}x${H} . ${H}x1`,
  work: { bytes: layers * H * H * 4 },
  ours: (_, backend) =>
    prepared(backend, (g) =>
      Effect.gen(function*() {
        let y: Tensor.Tensor = yield* g.input("x", "f32", [H, 1])
        for (let l = 0; l < layers; l++) y = yield* Ops.mulMat(yield* g.param(`w${l}`, "f32", [H, H]), y)
        yield* g.output(y)
      })),
  peer: (tf) => {
    const ws = Array.from({ length: layers }, (_, l) => tf.tensor2d(Generators.values(l + 2, H * H), [H, H]))
    const x = tf.tensor2d(Generators.values(1, H), [1, H])
    return () =>
      tf.tidy(() => {
        let y = x
        for (const w of ws) y = tf.matMul(y, w, false, true)
        return y
      }).dispose()
  }
})

const block = (H: number, T: number, nh: number, F: number): Case => {
  const D = H / nh
  const flops = 2 * T * (4 * H * H + 3 * H * F) + 2 * 2 * T * T * H
  return {
    name: "transformer_block",
    size: `H${H} T${T} heads${nh} F${F}`,
    work: { flops },
    ours: (_, backend) =>
      prepared(backend, (g) =>
        Effect.gen(function*() {
          const x = yield* g.input("x", "f32", [H, T])
          const w = (name: string, k: number, m: number) => g.param(name, "f32", [k, m])
          const [wq, wk, wv, wo] = [
            yield* w("wq", H, H),
            yield* w("wk", H, H),
            yield* w("wv", H, H),
            yield* w("wo", H, H)
          ]
          const [wg, wu, wd] = [yield* w("wg", H, F), yield* w("wu", H, F), yield* w("wd", F, H)]
          const n1 = yield* g.param("n1", "f32", [H])
          const n2 = yield* g.param("n2", "f32", [H])
          const h = yield* Ops.mul(Ops.rmsNorm(x, 1e-6), n1)
          const heads = (t: Tensor.TensorLike) => Ops.permute(Ops.reshape(t, [D, nh, T]), [0, 2, 1, 3]) // [D, T, nh]
          const q = yield* heads(Ops.mulMat(wq, h))
          const k = yield* heads(Ops.mulMat(wk, h))
          const vT = yield* Ops.cont(Ops.permute(Ops.reshape(Ops.mulMat(wv, h), [D, nh, T]), [1, 2, 0, 3])) // [T, D, nh]
          const p = yield* Ops.softMax(Ops.diagMaskInf(Ops.mulMat(k, q), 0), { scale: 1 / Math.sqrt(D) }) // [Tk, Tq, nh]
          const att = yield* Ops.reshape(Ops.cont(Ops.permute(Ops.mulMat(vT, p), [0, 2, 1, 3])), [H, T])
          const o = yield* Ops.add(Ops.mulMat(wo, att), x)
          const m = yield* Ops.mul(Ops.rmsNorm(o, 1e-6), n2)
          const ff = yield* Ops.mulMat(wd, Ops.mul(Ops.silu(Ops.mulMat(wg, m)), Ops.mulMat(wu, m)))
          yield* g.output(Ops.add(ff, o))
        })),
    peer: (tf) => {
      const t2 = (r: number, c: number, s: number) =>
        tf.tensor2d(Generators.values(s, r * c, { min: 0.05, max: 0.5 }), [r, c])
      const x = t2(T, H, 1)
      const [wq, wk, wv, wo] = [t2(H, H, 2), t2(H, H, 3), t2(H, H, 4), t2(H, H, 5)]
      const [wg, wu, wd] = [t2(H, F, 6), t2(H, F, 7), t2(F, H, 8)]
      const mask = tf.linalg.bandPart(tf.ones([T, T]), -1, 0)
      const neg = tf.mul(tf.sub(1, mask), -1e9)
      const norm = (a: TfCore.Tensor) => tf.mul(a, tf.rsqrt(tf.add(tf.mean(tf.square(a), -1, true), 1e-6)))
      const heads = (a: TfCore.Tensor) => tf.transpose(tf.reshape(a, [T, nh, D]), [1, 0, 2])
      return () =>
        tf.tidy(() => {
          const h = norm(x)
          const q = heads(tf.matMul(h, wq))
          const k = heads(tf.matMul(h, wk))
          const v = heads(tf.matMul(h, wv))
          const s = tf.add(tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(D)), neg)
          const att = tf.reshape(tf.transpose(tf.matMul(tf.softmax(s), v), [1, 0, 2]), [T, H])
          const o = tf.add(tf.matMul(att, wo), x)
          const m = norm(o)
          const gate = tf.matMul(m, wg)
          return tf.add(tf.matMul(tf.mul(tf.mul(gate, tf.sigmoid(gate)), tf.matMul(m, wu)), wd), o)
        }).dispose()
    }
  }
}

/** a comma-separated list of positive integers, or the default */
const sizesOf = (arg: string | undefined, fallback: ReadonlyArray<number>): ReadonlyArray<number> => {
  if (arg === undefined) return fallback
  const xs = arg.split(",").map(Number)
  if (xs.some((x) => !Number.isInteger(x) || x < 1)) fail(`expected positive integers, got ${arg}`)
  return xs
}

const allCases = (): ReadonlyArray<Case> => {
  const square = sizesOf(args.sizes, quick ? [64, 128, 256] : [256, 512, 1024, 2048, 4096, 8192])
  const squareF16 = sizesOf(args.sizes, quick ? [128] : [4096, 8192])
  const [elements] = sizesOf(args.elements, [quick ? 1 << 18 : 1 << 26])
  const [rowCount] = sizesOf(args.rows, [quick ? 16 : 4096])
  // decode shapes: a model of hidden size H, one token and small batches (and a 512-token prefill)
  const H = quick ? 256 : 4096
  const decodeColumns = quick ? [1, 8] : [1, 8, 512]
  return [
    ...square.map((n) => mm(n, n, n, "f32")),
    ...decodeColumns.map((n) => mm(H, n, H, "f32")),
    decodeChain(quick ? 8 : 20, H),
    ...squareF16.map((n) => mm(n, n, n, "f16")),
    elementwise("add", elements),
    elementwise("mul", elements),
    rows("soft_max", rowCount, 4096),
    rows("rms_norm", rowCount, 4096),
    manyNodes(1),
    manyNodes(1000),
    quick ? block(256, 32, 4, 512) : block(4096, 512, 32, 11008),
    ...modelCases(prepared, quick)
  ]
}

// ------------------------------------------------------------------------------------------------------------
// measurement
// ------------------------------------------------------------------------------------------------------------

/**
 * Warm-up until the speed settles: a first run (it creates the case's pipelines), then at least WARMUP_MS
 * of runs, then batches of 10 runs until a batch's median is within 3% of the one before, or WARMUP_MAX_MS.
 * The H200 and H100 idle their SM clock at 345 MHz while the host makes a case's inputs and climb to 1980
 * MHz within a second of load; a warm-up timed from before the first run spent most of its time creating
 * pipelines, so some cases ran at the idle clock throughout (benchmarks/RESULTS.md, runs fq and fr).
 */
const WARMUP_MS = quick ? 100 : 1500
const WARMUP_MAX_MS = quick ? 500 : 8000

const batchMedian = <E, R>(run: Effect.Effect<void, E, R>, n: number) =>
  Effect.gen(function*() {
    const times: Array<number> = []
    for (let k = 0; k < n; k++) {
      const t0 = performance.now()
      yield* run
      times.push(performance.now() - t0)
    }
    return median(times)
  })

/** median wall time of RUNS runs after warm-up */
const medianOf = <E, R>(run: Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    yield* run
    const start = performance.now()
    let last = Infinity
    for (;;) {
      const m = yield* batchMedian(run, 10)
      const elapsed = performance.now() - start
      if (elapsed >= WARMUP_MAX_MS || (elapsed >= WARMUP_MS && Math.abs(m - last) <= 0.03 * last)) break
      last = m
    }
    return yield* batchMedian(run, RUNS)
  })

/** the GPU's own time for a run (timestamp queries around each dispatch, summed), median of 3 */
const gpuTimeOf = <E, R>(backend: Backend.Backend, run: Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    const times: Array<number> = []
    for (let k = 0; k < 3; k++) {
      const trace = yield* backend.captureNext
      yield* run
      const entries = (yield* trace).entries
      if (args.profile && k === 2) {
        for (const e of entries) {
          process.stderr.write(
            `\n  ${e.op} ${e.ne.join("x")} ${e.kernel.split("|")[0]} ${((e.gpuTimeNs ?? 0) / 1e6).toFixed(3)} ms`
          )
        }
        process.stderr.write("\n")
      }
      if (entries.some((e) => e.gpuTimeNs === undefined)) return undefined
      times.push(entries.reduce((s, e) => s + e.gpuTimeNs!, 0) / 1e6)
    }
    return median(times)
  })

const median = (xs: Array<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** what the H200 and H100 can do at most (datasheets): f32 FMA, f16 tensor cores (dense), HBM3e bandwidth */
const rooflines: Record<string, { readonly f32: number; readonly f16: number; readonly bw: number }> = {
  h200: { f32: 67e12, f16: 989e12, bw: 4.8e12 },
  // SXM5, HBM3
  h100: { f32: 67e12, f16: 989e12, bw: 3.35e12 }
}

const rate = (w: Work, ms: number) =>
  w.flops !== undefined
    ? { value: w.flops / (ms / 1e3), unit: "FLOP/s" }
    : w.bytes !== undefined
    ? { value: w.bytes / (ms / 1e3), unit: "B/s" }
    : { value: (ms * 1e3) / (w.nodes ?? 1), unit: "us/node" }

const fmt = (r: { value: number; unit: string }) =>
  r.unit === "FLOP/s"
    ? r.value >= 1e12 ? `${(r.value / 1e12).toFixed(2)} TFLOP/s` : `${(r.value / 1e9).toFixed(2)} GFLOP/s`
    : r.unit === "B/s"
    ? r.value >= 1e12 ? `${(r.value / 1e12).toFixed(2)} TB/s` : `${(r.value / 1e9).toFixed(2)} GB/s`
    : `${r.value.toFixed(2)} us/node`

const main = Effect.gen(function*() {
  // one Dawn instance for both: our provider takes navigator.gpu when it exists
  const extra = args.toggles?.split(",") ?? []
  const toggles = [...WebGpu.defaultToggles, ...extra]
  yield* Effect.promise(() => openDawn(extra))
  const [device] = yield* WebGpu.make({
    devices: 1,
    ...(args.tile ? { matrixTile: checked(() => parseTile(args.tile!)) } : {}),
    ...(args["matrix-order"] ? { matrixOrder: checked(() => parseOrder(args["matrix-order"]!)) } : {}),
    ...(args["register-order"] ? { registerOrder: checked(() => parseOrder(args["register-order"]!)) } : {}),
    ...(args.regs ? { registerTile: checked(() => parseRegs(args.regs!)) } : {}),
    ...(args.qdecode ? { quantizedDecode: checked(() => parseDecode(args.qdecode!)) } : {}),
    ...(args.fa ? { attentionDecode: checked(() => parseAttention(args.fa!)) } : {}),
    ...(args["fa-prefill"] ? { attentionPrefill: checked(() => parsePrefillAttention(args["fa-prefill"]!)) } : {}),
    ...(args["q-prefill"] ? { quantizedPrefill: checked(() => parseQuantizedPrefill(args["q-prefill"]!)) } : {})
  })
  const backend = yield* device.makeBackend()
  const adapter = device.description
  const roof = Object.entries(rooflines).find(([k]) => adapter.toLowerCase().includes(k))?.[1]

  let tf: Tf | undefined
  if (args.peer) {
    tf = yield* Effect.promise(async () => {
      const t = await import("@tensorflow/tfjs-core")
      await import("@tensorflow/tfjs-backend-webgpu")
      await t.setBackend("webgpu")
      await t.ready()
      // tfjs runs an op on the CPU when its inputs are small (< 1000 elements) and not yet on the GPU, which
      // would time its CPU kernels in the 1- and 1000-node graphs: every peer op runs on the GPU here
      t.env().set("WEBGPU_CPU_FORWARD", false)
      return t
    })
  }
  const tfBackend = tf?.backend() as unknown as
    | {
      device: GPUDevice
      ensureCommandEncoderReady: () => void
      endComputePassEncoder: () => void
      submitQueue: () => void
    }
    | undefined

  const all = allCases()
  const unknown = (wanted ?? []).filter((w) => !all.some((c) => c.name === w))
  if (unknown.length > 0) {
    fail(`unknown cases: ${unknown.join(", ")}; the cases are ${[...new Set(all.map((c) => c.name))].join(", ")}`)
  }
  const cases = all.filter((c) => wanted === undefined || wanted.includes(c.name))
  const results: Array<Record<string, unknown>> = []
  for (const [i, c] of cases.entries()) {
    process.stderr.write(`[${i + 1}/${cases.length}] ${c.name} ${c.size} ... `)
    const [oursMs, gpuMs] = yield* Effect.scoped(
      Effect.flatMap(c.ours(device, backend), (run) => Effect.zip(medianOf(run), gpuTimeOf(backend, run)))
    )
    let peerMs: number | undefined
    if (tf !== undefined && tfBackend !== undefined && c.peer !== undefined) {
      const run = c.peer(tf)
      const once = async () => {
        run()
        // what tfjs does before a readback: close its pass and submit what it batched
        tfBackend.ensureCommandEncoderReady()
        tfBackend.endComputePassEncoder()
        tfBackend.submitQueue()
        await tfBackend.device.queue.onSubmittedWorkDone()
      }
      peerMs = yield* medianOf(Effect.promise(once))
    }
    const ours = rate(c.work, oursMs)
    const peer = peerMs === undefined ? undefined : rate(c.work, peerMs)
    const ratio = peerMs === undefined ? undefined : peerMs / oursMs
    const peak = roof === undefined
      ? undefined
      : c.work.flops !== undefined
      ? (c.work.dtype === "f16" ? roof.f16 : roof.f32)
      : c.work.bytes !== undefined
      ? roof.bw
      : undefined
    const ofRoof = peak === undefined ? undefined : (100 * ours.value) / peak
    process.stderr.write(`${oursMs.toFixed(3)} ms\n`)
    const gpu = gpuMs === undefined ? undefined : rate(c.work, gpuMs)
    results.push({ case: c.name, size: c.size, oursMs, peerMs, ours, peer, ratio, ofRoofline: ofRoof, gpuMs, gpu })
  }

  const header = ["case", "size", "ours", "peer (tfjs)", "ratio", "% roofline", "ours, GPU time only"]
  const table = results.map((r) => [
    String(r.case),
    String(r.size),
    `${fmt(r.ours as never)} (${(r.oursMs as number).toFixed(3)} ms)`,
    r.peer ? `${fmt(r.peer as never)} (${(r.peerMs as number).toFixed(3)} ms)` : "-",
    r.ratio ? `${(r.ratio as number).toFixed(2)}x` : "-",
    r.ofRoofline === undefined ? "-" : `${(r.ofRoofline as number).toFixed(1)}%`,
    r.gpuMs === 0
      ? "below the timer's step"
      : r.gpu
      ? `${fmt(r.gpu as never)} (${(r.gpuMs as number).toFixed(3)} ms)`
      : "-"
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i].length)))
  const line = (r: Array<string>) => r.map((c, i) => c.padEnd(widths[i])).join(" | ")
  console.log(`f16 mul_mat on subgroup matrices: ${WebGpuDevice.hasSubgroupMatrices(device) ? "yes" : "no"}`)
  console.log(
    `adapter: ${adapter}\nDawn toggles: ${
      toggles.join(", ")
    }\nmedian of ${RUNS} runs after a warm-up of ${WARMUP_MS}-${WARMUP_MAX_MS} ms (until 10-run medians agree within 3%); a run = submit + GPU done;\n` +
      `GPU time: the dispatches' own time from timestamp queries, median of 3 captured runs\n`
  )
  console.log(line(header))
  console.log(widths.map((w) => "-".repeat(w)).join("-|-"))
  for (const r of table) console.log(line(r))

  const date = new Date().toISOString().slice(0, 10)
  const out = args.out ?? path.join(process.cwd(), "..", "benchmarks", "runs", date, `bench-${args.label}.json`)
  fs.mkdirSync(path.dirname(out), { recursive: true })
  fs.writeFileSync(
    out,
    JSON.stringify(
      { date, adapter, toggles, runs: RUNS, quick, command: process.argv.slice(2).join(" "), results },
      null,
      2
    )
  )
  console.log(`\nwritten to ${path.relative(process.cwd(), out)}`)
})

Effect.runPromise(Effect.scoped(main)).then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
