/**
 * The page's models: a synthetic one (`Fixture.demo`, the llm package's oracle fixture qwen3-q6_K) made in
 * memory, loaded onto the page's best device, and 16 greedy tokens streamed onto the page; then any GGUF
 * file the user picks, read from its File a slice at a time (`Llm.fromBlob`), with a text prompt.
 */
import { Registry } from "@effect-gpu/core"
import { Fixture, Llm } from "@effect-gpu/llm"
import { Effect, Stream } from "effect"

export const prompt = [1, 40, 271, 7, 120, 299, 33, 260, 64, 5, 181, 222, 90, 13, 250, 77]

/** generates, calling `onToken` as each comes; the tokens */
export const generate = (onToken: (token: number, text: string) => void) =>
  Effect.gen(function*() {
    const device = yield* Registry.bestDevice
    const llm = yield* Llm.fromBytes(Fixture.make(Fixture.demo), { file: "synthetic qwen3", size: 64, device })
    const tokens: Array<number> = []
    yield* Stream.runForEach(
      llm.generate(prompt, { temperature: 0, maxTokens: 16, ignoreEndOfGeneration: true }),
      (g) => Effect.sync(() => (tokens.push(g.token), onToken(g.token, g.text)))
    )
    return { device: device.name, tokens }
  }).pipe(Effect.scoped)

/** the greedy continuation of a text prompt from a GGUF file the user picked, calling `onProgress` as it loads */
export const generateFrom = (
  file: Blob,
  text: string,
  options: {
    readonly maxTokens: number
    readonly onProgress: (loaded: number, total: number) => void
    readonly onToken: (token: number, text: string) => void
  }
) =>
  Effect.gen(function*() {
    const device = yield* Registry.bestDevice
    const llm = yield* Llm.fromBlob(file, {
      size: 512,
      device,
      onProgress: (p) => Effect.sync(() => options.onProgress(p.bytes, p.total))
    })
    const tokens: Array<number> = []
    yield* Stream.runForEach(
      llm.generate(text, { temperature: 0, maxTokens: options.maxTokens }),
      (g) => Effect.sync(() => (tokens.push(g.token), options.onToken(g.token, g.text)))
    )
    return { device: device.name, file: llm.file, tokens }
  }).pipe(Effect.scoped)
