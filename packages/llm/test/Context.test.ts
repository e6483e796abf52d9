import { Cpu, Registry } from "@effect-gpu/core"
import type { Device } from "@effect-gpu/core"
import { Context, Fixture, Gguf, Hyperparameters, Weights } from "@effect-gpu/llm"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { uncachedLogits } from "./uncached.js"

const shape = { hidden: 64, layers: 2, heads: 4, kvHeads: 2, ffn: 96, vocab: 300 } as const
const tokens = [1, 5, 260, 42, 7, 299, 3]

const model = (options: Partial<Fixture.Options> = {}) =>
  Effect.gen(function*() {
    const bytes = Fixture.make({ architecture: "llama", ...shape, dtype: "f32", ...options })
    const file = yield* Gguf.parse(bytes)
    const h = yield* Hyperparameters.fromGguf(file)
    return { bytes, file, h }
  })

/** the whole sequence at once without a cache: every position's logits, token-major */
const uncached = (device: Device.Device, m: Effect.Effect.Success<ReturnType<typeof model>>) =>
  uncachedLogits(device, m.bytes, m.file, m.h, tokens)

/** a context for the default model on `device` */
const open = (device: Device.Device, options: Context.Options) =>
  Effect.gen(function*() {
    const m = yield* model()
    const weights = yield* Weights.load(device, m.file, m.bytes)
    return { m, context: yield* Context.make(device, m.h, weights, options) }
  })

/**
 * decoding steps of `steps` after the tokens on `on` (a context of 16 positions, windows of 8 keys): the
 * first step's trace entries and every step's logits
 */
const decodeSteps = (
  on: Device.Device,
  m: Effect.Effect.Success<ReturnType<typeof model>>,
  steps: ReadonlyArray<number>
) =>
  Effect.gen(function*() {
    const weights = yield* Weights.load(on, m.file, m.bytes)
    const context = yield* Context.make(on, m.h, weights, { size: 16, keyPadding: 8 })
    yield* context.evaluate(tokens)
    const trace = yield* context.backend.captureNext
    const logits: Array<number> = []
    for (const t of steps) logits.push(...(yield* context.evaluate([t])))
    return { entries: (yield* trace).entries, logits }
  })

/**
 * the tokens twice as one prompt (past 8 positions: prompt products, the matrix-vector kernels take 8 columns
 * or fewer) on `on`, in a context of 16 positions: its trace entries and the last token's logits
 */
const promptOn = (on: Device.Device, m: Effect.Effect.Success<ReturnType<typeof model>>) =>
  Effect.gen(function*() {
    const weights = yield* Weights.load(on, m.file, m.bytes)
    const context = yield* Context.make(on, m.h, weights, { size: 16 })
    const trace = yield* context.backend.captureNext
    const logits = yield* context.evaluate([...tokens, ...tokens])
    return { entries: (yield* trace).entries, logits }
  })

/** asserts `got` has `want`'s length and each value within `bound` of it (of 1 + |want| where `relative`) */
const within = (got: ArrayLike<number>, want: ArrayLike<number>, bound: number, what: string, relative = false) => {
  assert.strictEqual(got.length, want.length, what)
  let worst = 0
  for (let i = 0; i < want.length; i++) {
    worst = Math.max(worst, Math.abs(got[i] - want[i]) / (relative ? 1 + Math.abs(want[i]) : 1))
  }
  assert.isBelow(worst, bound, what)
}

// the cache holds keys and values in f16; the uncached graph keeps them in f32
const close = (got: ArrayLike<number>, want: ArrayLike<number>, what: string) => within(got, want, 5e-3, what, true)

/** the CPU, or the WebGPU adapter (lavapipe in CI; a missing one fails under CI=true) */
const pick = (gpu: boolean) =>
  Effect.gen(function*() {
    const devices = yield* Registry.devices
    if (!gpu) return devices.find((d) => d.name === "CPU")
    const found = devices.find((d) => d.name.startsWith("WebGPU"))
    if (found === undefined) {
      if (process.env.CI === "true") assert.fail("no WebGPU adapter under CI=true")
      console.log("no WebGPU adapter here: the context's WebGPU tests are skipped")
    }
    return found
  })

const suite = (gpu: boolean) =>
  describe(`a context on ${gpu ? "WebGPU" : "the CPU"}`, () => {
    const layer = gpu ? WebGpu.layerOrCpu() : Cpu.layer()
    for (const [cacheType, attention] of [["f16", "auto"], ["f32", "auto"], ["f16", "chain"]] as const) {
      it.scoped(
        `micro-batches, cache windows and decoding give the uncached graph's logits (${cacheType} cache, ${attention} attention)`,
        () =>
          Effect.gen(function*() {
            const device = yield* pick(gpu)
            if (device === undefined) {
              return
            }
            const m = yield* model({ architecture: "qwen3" })
            const want = yield* uncached(device, m)
            const weights = yield* Weights.load(device, m.file, m.bytes)
            // a batch of 3 and windows of 4 keys: the prompt crosses both boundaries
            const context = yield* Context.make(device, m.h, weights, {
              size: 16,
              ubatch: 3,
              keyPadding: 4,
              cacheType,
              attention
            })
            const all = yield* context.evaluate(tokens, { allLogits: true })
            close(all, want, "every position, in micro-batches")
            assert.strictEqual(yield* context.position, tokens.length)
            // the prompt less its last token, then the last alone: the last position's logits
            yield* context.truncate(0)
            yield* context.evaluate(tokens.slice(0, -1))
            const last = yield* context.evaluate(tokens.slice(-1))
            close(last, want.subarray((tokens.length - 1) * m.h.vocab), "prefill n-1 then decode 1")
            // one token at a time through the same plans
            yield* context.truncate(2)
            for (const t of tokens.slice(2, -1)) {
              yield* context.evaluate([t])
            }
            const again = yield* context.evaluate(tokens.slice(-1))
            close(again, last, "decoding token by token after truncating")
          }).pipe(Effect.provide(layer)),
        120_000
      )
    }

    // a layer's q, k and v as one product, and its gate and up as one (the swiglu over the result's halves)
    it.scoped(
      "stacked products (q, k and v; gate and up) give the logits of apart ones (biases, q/k norms, q4_0 rows of 256-byte multiples)",
      () =>
        Effect.gen(function*() {
          const device = yield* pick(gpu)
          if (device === undefined) {
            return
          }
          for (
            const options of [{ architecture: "qwen2" }, { architecture: "qwen3", dtype: "q4_0", hidden: 128 }] as const
          ) {
            const m = yield* model(options)
            const weights = yield* Weights.load(device, m.file, m.bytes)
            assert.strictEqual(weights.stacks.size, 2 * shape.layers, `${options.architecture}: two stacks a layer`)
            for (let l = 0; l < shape.layers; l++) {
              assert.deepStrictEqual(weights.stacks.get(`blk.${l}.ffn_gate_up.weight`)?.ne.slice(0, 2), [
                m.h.hidden,
                2 * shape.ffn
              ])
            }
            // the logits, and the products the prompt ran
            const logits = (projections: "stacked" | "apart") =>
              Effect.gen(function*() {
                const context = yield* Context.make(device, m.h, weights, { size: 16, ubatch: 8, projections })
                const trace = yield* context.backend.captureNext
                const values = yield* context.evaluate(tokens, { allLogits: true })
                const products = (yield* trace).entries.filter((e) => e.op.startsWith("mul_mat")).length
                return { values, products }
              })
            const { products: apartProducts, values: apart } = yield* logits("apart")
            const { products: stackedProducts, values: stacked } = yield* logits("stacked")
            // three products a layer fewer: two of q, k and v, one of gate and up (a backend's fusions may
            // merge more of the apart ones)
            if (!gpu) assert.strictEqual(apartProducts - stackedProducts, 3 * shape.layers, options.architecture)
            within(stacked, apart, 1e-4, options.architecture)
          }
        }).pipe(Effect.provide(layer)),
      120_000
    )

    // a llama decoding step on int8 products: its q/k/v stack stores the keys, rotated, and the values into
    // the caches (no store of their own), giving the logits of a device that stores them apart
    if (gpu) {
      it.scoped("a decoding step's q/k/v stack stores its keys and values, as a separate store would", () =>
        Effect.gen(function*() {
          const device = yield* pick(gpu)
          if (device === undefined) {
            return
          }
          if (!WebGpuDevice.hasInt8Dot(device)) {
            console.log(`no dot4I8Packed on ${device.description}: no int8 stack to store from`)
            return
          }
          const [apart] = yield* WebGpu.make({ devices: 1, storeKeysInProducts: false })
          const m = yield* model({ dtype: "q4_0", hidden: 128 })
          const fused = yield* decodeSteps(device, m, [10, 11])
          const kept = yield* decodeSteps(apart, m, [10, 11])
          const stacks = fused.entries.filter((e) =>
            e.op === "mul_mat_stack"
          )
          assert.strictEqual(stacks.length, shape.layers)
          assert.isTrue(stacks.every((e) => e.variant?.stores === "kv"))
          assert.notInclude(fused.entries.map((e) => e.op), "rope_set_rows_kv")
          assert.include(kept.entries.map((e) => e.op), "rope_set_rows_kv")
          assert.strictEqual(fused.entries.length, kept.entries.length - shape.layers)
          within(fused.logits, kept.logits, 1e-5, "stores")
        }).pipe(Effect.provide(layer)), 120_000)

      // ... and its norms made by the products that read them (the residual sums by the products before:
      // mul_mat_add), giving the logits of a device that keeps each sum beside its norm in a dispatch of its
      // own; the output's norm, before the head's plain product, keeps its dispatch
      it.scoped("a decoding step's stacks and gated FFNs make the norms they read, as a norm of its own would", () =>
        Effect.gen(function*() {
          const device = yield* pick(gpu)
          if (device === undefined) {
            return
          }
          const [apart] = yield* WebGpu.make({ devices: 1, normsInProducts: false })
          const half = device.description.includes("subgroups") && device.description.includes("shader-f16")
          const dtypes = [
            ...(WebGpuDevice.hasInt8Dot(device) ? ["q8_0" as const] : []),
            ...(half ? ["f16" as const] : [])
          ]
          if (dtypes.length < 2) {
            console.log(`on ${device.description}: no int8 or no f16-by-subgroups product`)
          }
          for (const dtype of dtypes) {
            const m = yield* model({ dtype, hidden: 128 })
            const fused = yield* decodeSteps(device, m, [10, 11, 12])
            const kept = yield* decodeSteps(apart, m, [10, 11, 12])
            const ops = fused.entries.map((e) =>
              e.op
            )
            assert.deepStrictEqual(
              fused.entries.filter((e) =>
                e.variant?.norm === true
              ).map((e) => e.op),
              Array.from({ length: shape.layers }, () => ["mul_mat_stack", "mul_mat_swiglu"]).flat(),
              dtype
            )
            assert.notInclude(ops, "add_rms_norm_keep", dtype)
            // every sum but the last (with the output's norm, add_rms_norm) made by its product
            assert.strictEqual(ops.filter((op) => op === "mul_mat_add").length, 2 * shape.layers - 1, dtype)
            assert.strictEqual(
              kept.entries.filter((e) => e.op === "add_rms_norm_keep").length,
              2 * shape.layers - 1,
              dtype
            )
            assert.strictEqual(fused.entries.length, kept.entries.length - 2 * shape.layers, dtype)
            assert.strictEqual(fused.logits.length, 3 * shape.vocab, dtype)
            within(fused.logits, kept.logits, 1e-4, dtype)
          }
        }).pipe(Effect.provide(layer)), 120_000)

      // ... and its attention, split over the keys, merged by the output projection that reads it (no merge
      // dispatch), giving the logits of a device that merges apart
      it.scoped("a decoding step's output projections merge the split attention they read, as a merge would", () =>
        Effect.gen(function*() {
          const device = yield* pick(gpu)
          if (device === undefined) {
            return
          }
          if (!WebGpuDevice.hasInt8Dot(device) || !device.description.includes("subgroups")) {
            console.log(`on ${device.description}: no int8 product or no decode attention to merge`)
            return
          }
          const [split] = yield* WebGpu.make({ devices: 1, attentionDecode: { splits: 3 } })
          const [apart] = yield* WebGpu.make({ devices: 1, attentionDecode: { splits: 3 }, mergesInProducts: false })
          const dtypes = ["q8_0" as const, ...(device.description.includes("shader-f16") ? ["f16" as const] : [])]
          for (const dtype of dtypes) {
            const m = yield* model({ dtype, hidden: 128 })
            const fused = yield* decodeSteps(split, m, [10, 11, 12])
            const kept = yield* decodeSteps(apart, m, [10, 11, 12])
            const merged = fused.entries.filter((e) =>
              e.variant?.merge !== undefined
            )
            assert.strictEqual(merged.length, shape.layers, dtype)
            assert.isTrue(
              merged.every((e) =>
                e.op === "mul_mat_add" && e.variant?.merge === "4x3x32"
              ),
              dtype
            )
            assert.notInclude(fused.entries.map((e) => e.variant?.family), "flash_attn_merge", dtype)
            assert.strictEqual(fused.entries.length, kept.entries.length - shape.layers, dtype)
            assert.strictEqual(fused.logits.length, 3 * shape.vocab, dtype)
            within(fused.logits, kept.logits, 1e-4, dtype)
          }
        }).pipe(Effect.provide(layer)), 120_000)

      // a prompt's gate and up products (one product over the layer's stacked weights) and their swiglu as one
      // gated product storing silu(gate) * up (gatedPrompts), against the product and the swiglu apart
      it.scoped("a prompt's gated FFN as one product gives the logits of its product and swiglu apart", () =>
        Effect.gen(function*() {
          const device = yield* pick(gpu)
          if (device === undefined) {
            return
          }
          const [fused] = yield* WebGpu.make({ devices: 1 })
          const [apart] = yield* WebGpu.make({ devices: 1, gatedPrompts: false })
          if (fused.description.includes("subgroup-matrix")) {
            console.log(`${fused.description}: the gated form on subgroup matrices is asked for only (kernel-check)`)
            return
          }
          for (const dtype of ["f16", "q8_0"] as const) {
            // (rows of 256 q8_0 values: gate's and up's weights back to back, a stack)
            const m = yield* model({ dtype, hidden: 256 })
            const [one, two] = yield* Effect.forEach([fused, apart], (on) =>
              promptOn(on, m))
            // every layer's but the last, whose feed-forward takes the last token's row alone
            const gated = one.entries.filter((e) =>
              e.variant?.gated === true
            )
            assert.strictEqual(gated.length, shape.layers - 1, dtype)
            assert.isTrue(
              gated.every((e) => e.op === "mul_mat_swiglu"),
              dtype
            )
            assert.strictEqual(one.entries.filter((e) => e.op === "glu").length, 0, dtype)
            assert.strictEqual(two.entries.filter((e) => e.op === "glu").length, shape.layers - 1, dtype)
            assert.strictEqual(two.entries.filter((e) => e.variant?.gated === true).length, 0, dtype)
            within(one.logits, two.logits, 1e-4, dtype, true)
          }
        }).pipe(Effect.provide(layer)), 120_000)

      // a prompt's q roped by its layer's key and value store (rope_set_rows_kv, on threads after the values'),
      // in normal (llama) and neox (qwen2, past q's and k's biases; qwen3, past their norms) order, against
      // the rope's own dispatch: the same values
      it.scoped("a prompt's q roped by its layer's key and value store gives the logits of its rope apart", () =>
        Effect.gen(function*() {
          const device = yield* pick(gpu)
          if (device === undefined) {
            return
          }
          const [apart] = yield* WebGpu.make({ devices: 1, queryRopesInStores: false })
          for (const architecture of ["llama", "qwen2", "qwen3"] as const) {
            const m = yield* model({ architecture, dtype: "f16" })
            const [one, two] = yield* Effect.forEach([device, apart], (on) =>
              promptOn(on, m))
            const stores = (entries: typeof one.entries, queries: boolean) =>
              entries.filter((e) =>
                e.op === "rope_set_rows_kv" && (e.variant?.queries === true) === queries
              ).length
            assert.strictEqual(stores(one.entries, true), shape.layers, architecture)
            assert.strictEqual(
              one.entries.filter((e) =>
                e.op === "rope"
              ).length,
              0,
              architecture
            )
            assert.strictEqual(stores(two.entries, false), shape.layers, architecture)
            assert.strictEqual(two.entries.filter((e) => e.op === "rope").length, shape.layers, architecture)
            assert.strictEqual(one.entries.length, two.entries.length - shape.layers, architecture)
            assert.deepStrictEqual(Array.from(one.logits), Array.from(two.logits), architecture)
          }
        }).pipe(Effect.provide(layer)), 120_000)

      // a k-quant mix as llama.cpp's Q4_K_M makes it (attn_v and ffn_down in q6_K, the rest q4_K): each
      // layer's q/k/v one stack of both types storing its keys and values, the CPU's logits
      it.scoped("a decoding step of a q4_K / q6_K mix stacks q, k and v over both types, as the CPU computes it", () =>
        Effect.gen(function*() {
          const device = yield* pick(gpu)
          const cpu = yield* pick(false)
          if (device === undefined || cpu === undefined) {
            return
          }
          if (!WebGpuDevice.hasInt8Dot(device)) {
            console.log(`no dot4I8Packed on ${device.description}: no int8 stack`)
            return
          }
          const m = yield* model({
            dtype: "q4_K",
            hidden: 512,
            heads: 8,
            kvHeads: 4,
            ffn: 512,
            types: { attn_v: "q6_K", ffn_down: "q6_K" }
          })
          const onGpu = yield* decodeSteps(device, m, [10])
          const onCpu = yield* decodeSteps(cpu, m, [10])
          const stacks = onGpu.entries.filter((e) =>
            e.op === "mul_mat_stack"
          )
          assert.strictEqual(stacks.length, shape.layers)
          for (const e of stacks) {
            assert.deepInclude(e.variant, { types: "q4_K,q4_K,q6_K", stores: "kv" })
          }
          // the GPU's prompt products of 7 columns keep the activations in f32 where the CPU rounds them to q8_K
          // as ggml does: a looser bound than an f32 model's
          within(onGpu.logits, onCpu.logits, 0.05, "a mixed model's decoding step", true)
        }).pipe(Effect.provide(layer)), 120_000)
    }

    // next: the argmax of the last logits taken with the step, in micro-batches and token by token
    it.scoped("next gives the argmax of the logits evaluate gives", () =>
      Effect.gen(function*() {
        const device = yield* pick(gpu)
        if (device === undefined) {
          return
        }
        const { context } = yield* open(device, { size: 16, ubatch: 3, keyPadding: 4 })
        const argmax = (xs: Float32Array) =>
          xs.reduce((best, x, i) => (x > xs[best] ? i : best), 0)
        for (const n of [tokens.length, 1, 2]) {
          yield* context.truncate(0)
          const logits = yield* context.evaluate(tokens.slice(0, n))
          yield* context.truncate(0)
          assert.strictEqual(yield* context.next(tokens.slice(0, n)), argmax(logits), `${n} tokens`)
          assert.strictEqual(yield* context.position, n)
        }
        // a step after the prompt, through the decode plan
        const logits = yield* context.evaluate([9])
        yield* context.truncate(2)
        assert.strictEqual(yield* context.next([9]), argmax(logits), "a decoding step")
      }).pipe(Effect.provide(layer)))

    // greedy: each step reads the token the step before left on the device, one step queued ahead (the
    // default) or three
    for (const stepsAhead of [1, 3]) {
      it.scoped(`greedy gives next's tokens with ${stepsAhead} step(s) run ahead and keeps the tokens taken`, () =>
        Effect.gen(function*() {
          const device = yield* pick(gpu)
          if (device === undefined) {
            return
          }
          const { context } = yield* open(device, { size: 16, ubatch: 3, keyPadding: 4, stepsAhead })
          // token by token through next: the continuation fills the context (7 + 9 positions)
          const want = [yield* context.next(tokens)]
          while (want.length < 10) {
            want.push(yield* context.next([want.at(-1)!]))
          }
          yield* context.truncate(0)
          const taken = yield* Effect.scoped(Effect.gen(function*() {
            const greedy = yield* context.greedy(tokens)
            const got = [yield* greedy.take, yield* greedy.take, yield* greedy.take, yield* greedy.take]
            // the position told as the tokens are taken, not only when the scope closes
            assert.strictEqual(yield* context.position, tokens.length + 4, "while taking")
            return got
          }))
          assert.deepStrictEqual(taken, want.slice(0, 4))
          assert.strictEqual(yield* context.position, tokens.length + 4, "the prompt and the tokens taken")
          assert.strictEqual(yield* context.next([want[4]]), want[5], "next goes on from the tokens taken")
          // to the context's end, across its windows of 4 keys, after a prompt of three micro-batches
          yield* context.truncate(0)
          const all = yield* Effect.scoped(Effect.gen(function*() {
            const greedy = yield* context.greedy(tokens)
            const got: Array<number> = []
            while (got.length < 10) {
              got.push(yield* greedy.take)
            }
            const full = yield* Effect.exit(greedy.take)
            assert.isTrue(Exit.isFailure(full) && String(full.cause).includes("is full"), String(full))
            return got
          }))
          assert.deepStrictEqual(all, want)
          assert.strictEqual(yield* context.position, 16)
          // a prompt of one token, and bad input failing before anything runs
          yield* context.truncate(0)
          const one = yield* Effect.scoped(Effect.flatMap(context.greedy([tokens[0]]), (g) =>
            g.take))
          assert.strictEqual(one, yield* Effect.andThen(context.truncate(0), context.next([tokens[0]])))
          const bad = yield* Effect.exit(Effect.scoped(context.greedy([shape.vocab])))
          assert.isTrue(Exit.isFailure(bad) && String(bad.cause).includes("outside the vocabulary"), String(bad))
        }).pipe(Effect.provide(layer)))
    }

    it.scoped("decoding allocates nothing per token once its plan exists", () =>
      Effect.gen(function*() {
        const device = yield* pick(gpu)
        if (device === undefined) {
          return
        }
        const { context } = yield* open(device, { size: 32, keyPadding: 32 })
        yield* context.evaluate(tokens)
        yield* context.evaluate([3])
        const before = device.ledger.snapshot()
        for (const t of [4, 5, 6, 7, 8, 9]) {
          yield* context.evaluate([t])
        }
        const after = device.ledger.snapshot()
        assert.strictEqual(after.buffers, before.buffers)
        assert.strictEqual(after.bytes, before.bytes)
        assert.strictEqual(yield* context.position, tokens.length + 7)
        // the backend's fusions run: each norm scaled in one dispatch, each residual sum computed with the
        // next norm (kept for the stream), so no separate mul or add of a norm is left, a layer's keys and
        // values stored by one dispatch, and q's rope with its attention
        const trace = yield* context.backend.captureNext
        yield* context.evaluate([10])
        const ops = (yield* trace).entries.map((e) =>
          e.op
        )
        if (gpu) {
          assert.include(ops, "rms_norm_mul")
          assert.include(ops, "add_rms_norm")
          assert.include(ops, "add_rms_norm_keep")
          assert.include(ops, "rope_set_rows_kv")
          assert.notInclude(ops, "set_rows")
          assert.notInclude(ops, "rope_set_rows")
          assert.notInclude(ops, "rms_norm")
          assert.notInclude(ops, "mul")
          // q's rope runs in its attention where the decode form computes it (a device with subgroups)
          if (device.description.includes("subgroups")) {
            assert.include(ops, "rope_flash_attn_ext")
            assert.notInclude(ops, "rope")
          }
        } else {
          assert.include(ops, "rms_norm")
        }
      }).pipe(Effect.provide(layer)))

    it.scoped("bad input fails with ModelError and leaves the cache as it was", () =>
      Effect.gen(function*() {
        const device = yield* pick(gpu)
        if (device === undefined) {
          return
        }
        const { context } = yield* open(device, { size: 8 })
        yield* context.evaluate([1, 2])
        for (
          const [input, problem] of [
            [[1, 2, 3, 4, 5, 6, 7], "do not fit the context of 8"],
            [[1, 300], "token 300 is outside the vocabulary of 300"],
            [[], "at least one token"]
          ] as const
        ) {
          const exit = yield* Effect.exit(context.evaluate(input))
          assert.isTrue(Exit.isFailure(exit), problem)
          if (Exit.isFailure(exit)) {
            const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
            assert.strictEqual(error?._tag, "ModelError")
            assert.include(error?.message ?? "", problem)
          }
        }
        assert.strictEqual(yield* context.position, 2)
        for (const options of [{ ubatch: 0 }, { stepsAhead: 0 }, { stepsAhead: 1.5 }]) {
          const bad = yield* Effect.exit(open(device, options))
          const name = Object.keys(options)[0]
          assert.isTrue(Exit.isFailure(bad) && String(bad.cause).includes(`context option ${name}`), String(bad))
        }
      }).pipe(Effect.provide(layer)))
  })

suite(false)
suite(true)

// llama.cpp's flash attention `auto` asks the device; so does a context's default: a device whose caps say its
// fused attention outruns the chain takes it for a prompt past the chain's 64 tokens, others the chain
it.scoped(
  "a prompt of 70 tokens takes fused attention where the device's caps ask for it, else the chain",
  () =>
    Effect.gen(function*() {
      const cpu = Cpu.make()
      const fused: Device.Device = { ...cpu, caps: { ...cpu.caps, fusedAttention: true } }
      const m = yield* model()
      const prompt = Array.from({ length: 70 }, (_, i) => (i * 37) % shape.vocab)
      const run = (device: Device.Device) =>
        Effect.gen(function*() {
          const weights = yield* Weights.load(device, m.file, m.bytes)
          const context = yield* Context.make(device, m.h, weights, { size: 80 })
          const trace = yield* context.backend.captureNext
          const logits = yield* context.evaluate(prompt)
          return { ops: (yield* trace).entries.map((e) => e.op), logits }
        })
      const asked = yield* run(fused)
      const plain = yield* run(cpu)
      assert.include(asked.ops, "flash_attn_ext")
      assert.notInclude(plain.ops, "flash_attn_ext")
      assert.include(plain.ops, "soft_max")
      close(asked.logits, plain.logits, "fused attention against the chain")
    }),
  120_000
)
