/**
 * Prints the spans of a small compute through OpenTelemetry's console exporter:
 *
 *   pnpm --filter @effect-gpu/example-tracing start
 */
import { WebGpu } from "@effect-gpu/webgpu"
import { ConsoleSpanExporter } from "@opentelemetry/sdk-trace-base"
import { Console, Effect } from "effect"
import { program, tracing } from "./src/program.js"

Effect.runPromise(
  program.pipe(
    Effect.tap((sum) => Console.log(`sum of the softmax rows: ${sum.toFixed(4)}`)),
    Effect.provide(WebGpu.layerOrCpu()),
    Effect.provide(tracing(new ConsoleSpanExporter()))
  )
).then(() => process.exit(0))
