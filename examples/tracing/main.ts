/**
 * Prints the spans of a small compute, then effect-gpu's metrics, through OpenTelemetry's console exporters:
 *
 *   pnpm --filter @effect-gpu/example-tracing start
 */
import { WebGpu } from "@effect-gpu/webgpu"
import { ConsoleMetricExporter, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics"
import { ConsoleSpanExporter } from "@opentelemetry/sdk-trace-base"
import { Console, Effect } from "effect"
import { program, tracing } from "./src/program.js"

Effect.runPromise(
  program.pipe(
    Effect.tap((sum) => Console.log(`sum of the softmax rows: ${sum.toFixed(4)}`)),
    Effect.provide(WebGpu.layerOrCpu()),
    // the metrics are exported as the SDK shuts down (the interval is longer than the program)
    Effect.provide(tracing(
      new ConsoleSpanExporter(),
      new PeriodicExportingMetricReader({ exporter: new ConsoleMetricExporter(), exportIntervalMillis: 60_000 })
    ))
  )
).then(() => process.exit(0))
