/**
 * A model running on one device: its weights, a KV cache and the plans that evaluate batches of tokens
 * against it. A prompt goes through in micro-batches (`ubatch`); each token after it in a batch of one.
 * Plans are made once per (batch size, cached keys rounded up to `keyPadding`) and reused, so decoding
 * allocates nothing and makes no pipelines per token.
 *
 * @since 0.1.0
 */
import type * as Backend from "@effect-gpu/core/Backend"
import type * as Device from "@effect-gpu/core/Device"
import type {
  AllocationError,
  BackendError,
  DeviceLost,
  NotAnOutput,
  OutOfBounds,
  Released,
  ShapeError,
  UnsupportedOp
} from "@effect-gpu/core/GpuError"
import * as Graph from "@effect-gpu/core/Graph"
import * as Ops from "@effect-gpu/core/Ops"
import * as Plan from "@effect-gpu/core/Plan"
import * as Tensor from "@effect-gpu/core/Tensor"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import * as Forward from "./Forward.js"
import type { Hyperparameters } from "./Hyperparameters.js"
import * as KvCache from "./KvCache.js"
import { ModelError } from "./ModelError.js"
import type { Weights } from "./Weights.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** positions the cache holds (default: the model's context length, at most 4096) */
  readonly size?: number
  /** the largest batch a prompt is evaluated in (default 512) */
  readonly ubatch?: number
  /** attention reads the cache in multiples of this many positions (default 256) */
  readonly keyPadding?: number
  /** names the model in failures */
  readonly file?: string
  /** the cache's type (default f16, or f32 where the device cannot store f16 rows) */
  readonly cacheType?: "f16" | "f32"
  /**
   * attention's form (Forward.Options.attention); default: fused where the device's caps say its fused
   * attention outruns the chain (Device.Caps.fusedAttention), else auto
   */
  readonly attention?: Forward.Options["attention"]
  /** q, k and v as one product or three (Forward.Options.projections; default auto) */
  readonly projections?: Forward.Options["projections"]
  /**
   * greedy decoding's steps queued past the one whose token is awaited (default 1): more absorb the host's
   * pauses (a completion seen late) at the cost of as many steps computed past where a generation stops
   */
  readonly stepsAhead?: number
  /**
   * plans kept (default 8, at least 4): each batch size and cache window a context meets compiles one,
   * with its own intermediates; past this many the least recently used is released with its memory, so
   * that a server's prompts of ever other lengths do not pile plans up
   */
  readonly plans?: number
}

/**
 * What evaluating can fail with.
 *
 * @since 0.1.0
 * @category errors
 */
export type EvaluateError =
  | ModelError
  | ShapeError
  | AllocationError
  | UnsupportedOp
  | DeviceLost
  | Released
  | OutOfBounds
  | BackendError
  | NotAnOutput

/**
 * @since 0.1.0
 * @category models
 */
export interface Context {
  readonly hyperparameters: Hyperparameters
  readonly backend: Backend.Backend
  /** positions the cache holds */
  readonly size: number
  /** tokens in the cache */
  readonly position: Effect.Effect<number>
  /**
   * Runs `tokens` after those in the cache and keeps them there; the logits of the last token ([vocab]),
   * or of each (`allLogits`: [vocab × tokens], token-major). Evaluations run one at a time; an interrupted
   * one keeps the micro-batches it finished.
   */
  readonly evaluate: (
    tokens: ReadonlyArray<number>,
    options?: { readonly allLogits?: boolean }
  ) => Effect.Effect<Float32Array, EvaluateError>
  /**
   * Runs `tokens` as `evaluate` does; the last token's likeliest next token (the argmax of its logits, the
   * first of equals, taken on the device: greedy decoding reads 4 bytes a token, not the vocabulary's
   * logits).
   */
  readonly next: (tokens: ReadonlyArray<number>) => Effect.Effect<number, EvaluateError>
  /**
   * Runs `tokens` as `evaluate` does; every token's embedding, its hidden state after the output norm
   * (what the head multiplies, as llama.cpp's embeddings are), [hidden × tokens], token-major.
   */
  readonly embed: (tokens: ReadonlyArray<number>) => Effect.Effect<Float32Array, EvaluateError>
  /**
   * Greedy decoding with steps run ahead: runs `tokens` as `next` does, then each `take` gives the next
   * greedy token while the device already computes the ones after it (`Options.stepsAhead`). A step reads
   * its token from where the step before left its argmax, so the host's work between steps no longer idles
   * the device. The scope holds the context; closing it waits for the steps in flight and leaves in the
   * cache `tokens` and every token taken whose step ran. `take` fails with ModelError once the context is
   * full.
   */
  readonly greedy: (tokens: ReadonlyArray<number>) => Effect.Effect<Greedy, EvaluateError, Scope.Scope>
  /** forgets the cache from position `n` on (0: all of it) */
  readonly truncate: (n: number) => Effect.Effect<void>
  /**
   * Fails with ModelError where `tokens` cannot run after `start` positions (none, one outside the
   * vocabulary, more than the context holds), as `evaluate`, `next` and `greedy` do; waits for nothing.
   */
  readonly check: (tokens: ReadonlyArray<number>, start: number) => Effect.Effect<void, ModelError>
}

/**
 * Greedy tokens from a context (`Context.greedy`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Greedy {
  /** the next greedy token */
  readonly take: Effect.Effect<number, EvaluateError>
}

/** whether the backend writes f16 rows with set_rows (a browser without shader-f16 does not) */
const storesF16 = (backend: Backend.Backend) =>
  Effect.gen(function*() {
    const dst = yield* Tensor.make("probe_dst", "f16", [64, 4])
    const src = yield* Tensor.make("probe_src", "f32", [64, 1])
    const idx = yield* Tensor.make("probe_idx", "i32", [1])
    return backend.device.supportsOp(yield* Ops.setRows(dst, src, idx))
  })

interface Compiled {
  readonly forward: Forward.Forward
  readonly plan: Plan.Plan
}

/**
 * A context for `weights` on `device` (the weights' device); the cache, plans and backend live as long as
 * the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  device: Device.Device,
  h: Hyperparameters,
  weights: Weights,
  options: Options = {}
): Effect.Effect<Context, AllocationError | DeviceLost | Released | ShapeError | ModelError, Scope.Scope> =>
  Effect.gen(function*() {
    const file = options.file ?? "<model>"
    const size = options.size ?? Math.min(h.contextLength, 4096)
    const ubatch = options.ubatch ?? 512
    const keyPadding = options.keyPadding ?? 256
    const stepsAhead = options.stepsAhead ?? 1
    const maxPlans = options.plans ?? 8
    for (const [name, value] of Object.entries({ size, ubatch, keyPadding, stepsAhead })) {
      if (!Number.isSafeInteger(value) || value < 1) {
        return yield* new ModelError({
          file,
          problem: `context option ${name} must be a positive integer, not ${value}`
        })
      }
    }
    // (a prompt's last batch and the decoding steps queued behind it each hold a plan in use)
    if (!Number.isSafeInteger(maxPlans) || maxPlans < 4) {
      return yield* new ModelError({ file, problem: `context option plans must be an integer from 4, not ${maxPlans}` })
    }
    const scope = yield* Effect.scope
    const backend = yield* device.makeBackend()
    const cacheType = options.cacheType ?? ((yield* storesF16(backend)) ? "f16" : "f32")
    // prompts' attention fused where the device's fused kernel outruns the chain, as llama.cpp's `auto`
    const attention = options.attention ?? (device.caps.fusedAttention ? "fused" : "auto")
    const cache = yield* KvCache.make(h, device.bufferType, size, cacheType)
    // the next token as a step's argmax leaves it and the step after reads it: a step fed by the one
    // before needs nothing from the host
    const feed = yield* Tensor.make("next_token", "i32", [1], { flags: Tensor.Flags.param })
    const [fed] = yield* Plan.bind(device.bufferType, [feed], { usage: "compute" })
    const bindings = [...weights.bindings, ...cache.bindings]
    const position = yield* Ref.make(0)
    // by key, least recently used first; each plan in a scope of its own, closed when it is let go
    const plans = new Map<string, { readonly made: Compiled; readonly scope: Scope.CloseableScope }>()
    const lock = yield* Effect.makeSemaphore(1)

    /**
     * what a batch reads back: the last token's logits, every token's, the last token's argmax, or every
     * token's embedding
     */
    type Read = "last" | "all" | "next" | "embeddings"
    const compiled = (n: number, keys: number, read: Read) => {
      const allLogits = read === "all"
      const key = `${n}:${keys}:${read}`
      const known = plans.get(key)
      if (known !== undefined) {
        plans.delete(key)
        plans.set(key, known)
        return Effect.succeed(known.made)
      }
      return Effect.gen(function*() {
        const forward = yield* Forward.make(h, weights, n, {
          file,
          cache: { cache, keys },
          allLogits,
          argmax: read === "next",
          embeddings: read === "embeddings",
          attention,
          ...(options.projections !== undefined ? { projections: options.projections } : {})
        })
        // the backend's fusions (rms_norm * weight, add + rms_norm, mul_mat + bias, silu * gate): fewer
        // dispatches a token; the plan still answers for the graph's own tensors
        const graph = backend.optimize(Graph.from(forward.graph))
        // an argmax is stored where the next step's token is read (the tensor that computes it after fusion)
        const feeds = forward.next === undefined
          ? []
          : [forward.next, ...(n === 1 ? [forward.tokens] : [])].map((t) => ({
            ...fed,
            tensor: Graph.resolve(graph, t)
          }))
        const planScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const plan = yield* backend.allocate(graph, { bindings: [...bindings, ...feeds] }).pipe(
          Scope.extend(planScope),
          Effect.onError((cause) => Scope.close(planScope, Exit.failCause(cause)))
        )
        const made = { forward, plan }
        plans.set(key, { made, scope: planScope })
        // (the least recently used: not a plan of the batch in hand, nor of a step queued just before it)
        for (const [old, entry] of plans) {
          if (plans.size <= maxPlans) break
          plans.delete(old)
          yield* Scope.close(entry.scope, Exit.void)
        }
        return made
      })
    }

    /** sets a batch's inputs (its tokens, or "fed": one token, the argmax the step before left) */
    const prepare = (tokens: ReadonlyArray<number> | "fed", start: number, read: Read) =>
      Effect.gen(function*() {
        const n = tokens === "fed" ? 1 : tokens.length
        const keys = Math.min(size, Math.ceil((start + n) / keyPadding) * keyPadding)
        const made = yield* compiled(n, keys, read)
        const { forward, plan } = made
        const inputs = forward.inputs(start)
        if (tokens !== "fed") yield* plan.set(forward.tokens, Int32Array.from(tokens))
        yield* plan.set(forward.positions, inputs.positions)
        yield* plan.setBytes(forward.mask, inputs.mask)
        return made
      })

    const batch = (tokens: ReadonlyArray<number>, start: number, read: Read) =>
      Effect.gen(function*() {
        const n = tokens.length
        const { forward, plan } = yield* prepare(tokens, start, read)
        const wanted = forward.next ?? forward.embeddings ?? forward.logits
        if (n > 1) {
          // a batch waits for its compute, which an interruption can stop between command buffers
          yield* backend.compute(plan)
          return yield* plan.get(wanted)
        }
        // one token: the read queued behind the compute, not after waiting for it (one wait a token, and
        // the read's copy rides with the step), then every failure of the step reported
        yield* backend.computeAsync(plan)
        const values = yield* plan.get(wanted)
        yield* backend.synchronize
        return values
      })

    /** runs tokens in micro-batches; what the last (or, for "all", every) batch read */
    /** fails where `tokens` cannot run after `start` */
    const check = (tokens: ReadonlyArray<number>, start: number): Effect.Effect<void, ModelError> => {
      if (tokens.length === 0) return new ModelError({ file, problem: "evaluate needs at least one token" })
      if (start + tokens.length > size) {
        return new ModelError({
          file,
          problem: `${tokens.length} tokens${
            start > 0 ? ` after ${start}` : ""
          } do not fit the context of ${size} positions`
        })
      }
      const bad = tokens.find((t) => !Number.isSafeInteger(t) || t < 0 || t >= h.vocab)
      return bad === undefined
        ? Effect.void
        : new ModelError({ file, problem: `token ${bad} is outside the vocabulary of ${h.vocab}` })
    }

    const run = (tokens: ReadonlyArray<number>, read: Read) =>
      lock.withPermits(1)(Effect.gen(function*() {
        // (every batch's rows are read for these)
        const everyBatch = read === "all" || read === "embeddings"
        const start = yield* Ref.get(position)
        yield* check(tokens, start)
        const parts: Array<Float32Array | Int32Array> = []
        for (let at = 0; at < tokens.length; at += ubatch) {
          const piece = tokens.slice(at, at + ubatch)
          const last = at + ubatch >= tokens.length
          // only the last batch reads what was asked for (its argmax, its logits), every one for "all" and "embeddings"
          const values = yield* batch(piece, start + at, last || everyBatch ? read : "last")
          yield* Ref.set(position, start + at + piece.length)
          if (everyBatch || last) parts.push(values as Float32Array | Int32Array)
        }
        return parts
      }))

    /** the batches' values as one array */
    const joined = (parts: ReadonlyArray<Float32Array | Int32Array>) => {
      if (parts.length === 1) return parts[0] as Float32Array
      const all = new Float32Array(parts.reduce((s, p) => s + p.length, 0))
      parts.reduce((at, p) => (all.set(p, at), at + p.length), 0)
      return all
    }

    const embed: Context["embed"] = (tokens) =>
      Effect.map(run(tokens, "embeddings"), joined).pipe(
        Effect.withSpan("Context.embed", { attributes: { tokens: tokens.length } })
      )

    const evaluate: Context["evaluate"] = (tokens, evaluateOptions) =>
      Effect.map(run(tokens, evaluateOptions?.allLogits === true ? "all" : "last"), joined).pipe(
        // a span a token without a stack trace: capturing one costs a visible share of a step's host time
        Effect.withSpan("Context.evaluate", { attributes: { tokens: tokens.length }, captureStackTrace: false })
      )

    const next: Context["next"] = (tokens) =>
      Effect.map(run(tokens, "next"), (parts) => (parts[0] as Int32Array)[0]).pipe(
        Effect.withSpan("Context.next", { attributes: { tokens: tokens.length }, captureStackTrace: false })
      )

    const greedy: Context["greedy"] = (tokens) =>
      Effect.gen(function*() {
        yield* Effect.acquireRelease(lock.take(1), () => lock.release(1))
        const start = yield* Ref.get(position)
        yield* check(tokens, start)
        const last = Math.floor((tokens.length - 1) / ubatch) * ubatch
        for (let at = 0; at < last; at += ubatch) {
          yield* batch(tokens.slice(at, at + ubatch), start + at, "last")
          yield* Ref.set(position, start + at + ubatch)
        }
        // the reads of the steps queued, oldest first; positions the queued steps fill; tokens taken
        const reads: Array<Effect.Effect<number, EvaluateError>> = []
        let ahead = start + last
        let taken = 0
        const queue = (piece: ReadonlyArray<number> | "fed") =>
          Effect.gen(function*() {
            const { forward, plan } = yield* prepare(piece, ahead, "next")
            yield* backend.computeAsync(plan)
            const bytes = yield* backend.getAsync(plan.location(forward.next!)!)
            reads.push(Effect.map(bytes, (b) => new DataView(b.buffer, b.byteOffset, 4).getInt32(0, true)))
            ahead += piece === "fed" ? 1 : piece.length
          })
        // the steps after the last taken token, `stepsAhead` queued past the one awaited, while the context has
        // room for them
        const runAhead: Effect.Effect<void, EvaluateError> = Effect.suspend(() =>
          ahead < size && reads.length <= stepsAhead ? Effect.zipRight(queue("fed"), runAhead) : Effect.void
        )
        // the cache keeps the tokens and each token taken whose step was queued (its position told as they are
        // taken), once those steps are done
        const kept = Effect.suspend(() => Ref.set(position, Math.min(ahead, start + tokens.length + taken)))
        yield* Effect.addFinalizer(() =>
          Effect.forEach(reads, Effect.ignore, { discard: true }).pipe(Effect.zipRight(kept))
        )
        yield* queue(tokens.slice(last))
        yield* runAhead
        const take: Greedy["take"] = Effect.suspend(() => {
          const read = reads[0]
          if (read === undefined) {
            return new ModelError({ file, problem: `the context of ${size} positions is full` })
          }
          return Effect.tap(read, () => {
            reads.shift()
            taken++
            return Effect.zipRight(runAhead, kept)
          })
        }).pipe(Effect.withSpan("Context.greedy.take", { captureStackTrace: false }))
        return { take }
      }).pipe(Effect.withSpan("Context.greedy", { attributes: { tokens: tokens.length }, captureStackTrace: false }))

    return {
      hyperparameters: h,
      backend,
      size,
      position: Ref.get(position),
      evaluate,
      next,
      embed,
      greedy,
      truncate: (n) => lock.withPermits(1)(Ref.update(position, (p) => Math.max(0, Math.min(p, n)))),
      check
    }
  })
