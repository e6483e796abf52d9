import type { Device } from "@effect-gpu/core"
import type { Gguf, Hyperparameters } from "@effect-gpu/llm"
import { Forward, Weights } from "@effect-gpu/llm"
import { Effect } from "effect"

/** `forward` (an uncached graph from position 0) computed on `device` over `tokens`: its logits */
export const forwardLogits = (
  device: Device.Device,
  weights: Weights.Weights,
  forward: Forward.Forward,
  tokens: ReadonlyArray<number>
) =>
  Effect.gen(function*() {
    const backend = yield* device.makeBackend()
    const plan = yield* backend.allocate(forward.graph, { bindings: weights.bindings })
    const inputs = forward.inputs(0)
    yield* plan.set(forward.tokens, Int32Array.from(tokens))
    yield* plan.set(forward.positions, inputs.positions)
    yield* plan.setBytes(forward.mask, inputs.mask)
    yield* backend.compute(plan)
    return (yield* plan.get(forward.logits)) as Float32Array
  })

/** a model's logits at every position of `tokens` from one uncached forward graph: [vocab × tokens] */
export const uncachedLogits = (
  device: Device.Device,
  bytes: Uint8Array,
  file: Gguf.GgufFile,
  h: Hyperparameters.Hyperparameters,
  tokens: ReadonlyArray<number>
) =>
  Effect.gen(function*() {
    const weights = yield* Weights.load(device, file, bytes)
    const forward = yield* Forward.make(h, weights, tokens.length, { allLogits: true })
    return yield* forwardLogits(device, weights, forward, tokens)
  })
