/**
 * Serves a GGUF model's tokens as server-sent events: `pnpm --filter @effect-gpu/example-llm-server start`.
 * MODEL is the GGUF file (without it, a small synthetic model made in memory, named so in /health); PORT
 * (default 8081) and HOST (default 127.0.0.1) say where it listens; BODY_LIMIT the largest body; POOLING
 * (mean or last) how embeddings are pooled where the model names no way.
 */
import { Registry } from "@effect-gpu/core"
import { Fixture, Llm } from "@effect-gpu/llm"
import { WebGpu } from "@effect-gpu/webgpu"
import { NodeContext, NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import * as Server from "./Server.js"

/** the model at MODEL, or a synthetic one */
const model = Layer.scoped(
  Llm.Llm,
  Effect.gen(function*() {
    const path = yield* Config.option(Config.string("MODEL"))
    if (Option.isSome(path)) return yield* Llm.load(path.value)
    yield* Effect.logWarning(
      "no MODEL: serving Fixture.demo, a synthetic qwen3 model made in memory (random weights: its text is noise)"
    )
    return yield* Llm.fromBytes(
      Fixture.make(Fixture.demo),
      { file: "synthetic qwen3", size: 1024, device: yield* Registry.bestDevice }
    )
  })
)

const main = Server.app.pipe(
  Layer.provide(model),
  Layer.provide(Layer.merge(WebGpu.layerOrCpu(), NodeContext.layer)),
  Layer.provide(
    NodeHttpServer.layerConfig(
      createServer,
      Config.all({
        port: Config.integer("PORT").pipe(Config.withDefault(8081)),
        host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1"))
      })
    )
  )
)

NodeRuntime.runMain(Layer.launch(main))
