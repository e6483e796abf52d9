/**
 * Starts the inference service: `pnpm --filter @effect-gpu/example-http-inference start`
 * PORT (default 8080) and HOST (default 127.0.0.1) say where it listens, BODY_LIMIT (bytes, default 64 KiB)
 * the largest body it reads, EFFECT_GPU_BACKEND=cpu forces the CPU (default: WebGPU if an adapter exists,
 * else the CPU).
 */
import { Cpu } from "@effect-gpu/core"
import { WebGpu } from "@effect-gpu/webgpu"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Layer } from "effect"
import { createServer } from "node:http"
import * as Inference from "./Inference.js"
import * as Server from "./Server.js"

const devices = Layer.unwrapEffect(
  Effect.map(
    Config.literal("webgpu", "cpu")("EFFECT_GPU_BACKEND").pipe(Config.withDefault("webgpu" as const)),
    (backend) => (backend === "cpu" ? Cpu.layer() : WebGpu.layerOrCpu())
  )
)

const main = Server.app.pipe(
  Layer.provide(Inference.layer(devices)),
  Layer.provide(
    NodeHttpServer.layerConfig(
      createServer,
      Config.all({
        port: Config.integer("PORT").pipe(Config.withDefault(8080)),
        // loopback unless asked: HOST=0.0.0.0 serves every interface
        host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1"))
      })
    )
  )
)

NodeRuntime.runMain(Layer.launch(main))
