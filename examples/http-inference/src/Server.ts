/**
 * The HTTP API: POST /infer with {"inputs": number[][]} (1 to 32 rows of 16 finite numbers) answers the
 * class probabilities of each row; GET /health names the device. Bad input gets 400 with the schema's
 * message, a lost device 503 (the model is being reloaded), anything else 500.
 */
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { Layer } from "effect"
import { Effect, ParseResult, Schema } from "effect"
import { Inference } from "./Inference.js"
import * as Mlp from "./Mlp.js"

export const Row = Schema.Array(Schema.Number.pipe(Schema.finite())).pipe(
  Schema.filter((r) => r.length === Mlp.INPUT || `each row needs ${Mlp.INPUT} numbers, got ${r.length}`)
)

export const InferRequest = Schema.Struct({
  inputs: Schema.Array(Row).pipe(
    Schema.filter((rs) =>
      (rs.length >= 1 && rs.length <= Mlp.MAX_BATCH) || `send 1 to ${Mlp.MAX_BATCH} rows, got ${rs.length}`
    )
  )
})

const error = (status: number, message: string) => HttpServerResponse.unsafeJson({ error: message }, { status })

export const router = HttpRouter.empty.pipe(
  HttpRouter.get(
    "/health",
    Effect.flatMap(Inference, (i) => Effect.map(i.device, (device) => HttpServerResponse.unsafeJson({ device })))
  ),
  HttpRouter.post(
    "/infer",
    Effect.gen(function*() {
      const body = yield* HttpServerRequest.schemaBodyJson(InferRequest)
      const inference = yield* Inference
      const prediction = yield* inference.infer(body.inputs)
      return HttpServerResponse.unsafeJson(prediction)
    }).pipe(
      Effect.catchTags({
        ParseError: (e) =>
          Effect.succeed(error(
            400,
            ParseResult.ArrayFormatter.formatErrorSync(e).map((i) =>
              `${i.path.length > 0 ? i.path.join(".") : "body"}: ${i.message}`
            ).join("; ")
          )),
        RequestError: (e) => Effect.succeed(error(400, `unreadable body: ${e.message}`)),
        DeviceLost: (e) => Effect.succeed(error(503, `${e.message}; the model is being reloaded, try again`))
      }),
      Effect.catchAll((e) => Effect.succeed(error(500, e.message)))
    )
  )
)

export const app = HttpServer.serve(router).pipe(HttpServer.withLogAddress)

export type ServerLayer = Layer.Layer<never, never, HttpServer.HttpServer | Inference>
