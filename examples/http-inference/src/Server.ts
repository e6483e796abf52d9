/**
 * The HTTP API: POST /infer with {"inputs": number[][]} (1 to 32 rows of 16 numbers, each finite as an
 * f32) answers the class probabilities of each row; GET /health names the device. Bad input gets 400
 * saying what is wrong and where, a body over BODY_LIMIT bytes 413, a wrong method 405 with `Allow`, a
 * lost device 503 (the model is being reloaded), anything else 500.
 */
import type { HttpServerError } from "@effect/platform"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { Layer } from "effect"
import { Config, Effect, Option, ParseResult, Schema } from "effect"
import { Inference } from "./Inference.js"
import * as JsonPosition from "./JsonPosition.js"
import * as Mlp from "./Mlp.js"

/** a value the model takes: a number an f32 holds (1e39 is finite as a double, not as an f32) */
export const Value = Schema.Number.pipe(
  Schema.filter((x) => Number.isFinite(x) && Number.isFinite(Math.fround(x)), {
    message: () => "each value must be a finite number within f32's range (|x| < 3.4e38)"
  })
)

export const Row = Schema.Array(Value).pipe(
  Schema.filter((r) => r.length === Mlp.INPUT || `each row needs ${Mlp.INPUT} numbers, got ${r.length}`)
)

export const InferRequest = Schema.Struct({
  inputs: Schema.Array(Row).pipe(
    Schema.filter((rs) =>
      (rs.length >= 1 && rs.length <= Mlp.MAX_BATCH) || `send 1 to ${Mlp.MAX_BATCH} rows, got ${rs.length}`
    )
  )
})

/** the largest body accepted, in bytes: BODY_LIMIT, default 64 KiB (32 rows of 16 numbers need ~12 KiB) */
export const bodyLimit = Config.integer("BODY_LIMIT").pipe(Config.withDefault(64 * 1024))

const error = (status: number, message: string, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson({ error: message }, { status, ...(headers === undefined ? {} : { headers }) })

class TooLarge {
  readonly _tag = "TooLarge"
  constructor(readonly limit: number) {}
}

class Malformed {
  readonly _tag = "Malformed"
  constructor(readonly reason: string) {}
}

/** the body as JSON: refused unread when its declared length is over the limit, cut off when it grows past */
const jsonBody = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const limit = yield* bodyLimit
  const declared = Number(request.headers["content-length"] ?? "0")
  if (declared > limit) return yield* Effect.fail(new TooLarge(limit))
  const text = yield* request.text.pipe(
    HttpServerRequest.withMaxBodySize(Option.some(limit)),
    Effect.mapError((e): TooLarge | HttpServerError.RequestError =>
      String(e.cause).includes("maxBytes") ? new TooLarge(limit) : e
    )
  )
  return yield* Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (e) => {
      const at = JsonPosition.firstError(text)
      return new Malformed(
        at === undefined
          ? String(e)
          : `unexpected ${at.found} at line ${at.line}, column ${at.column}`
      )
    }
  })
})

/** schema failures as `path: message` lines, the schema's own description left out */
const describeParse = (e: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(e).map((i) => {
    const where = i.path.length > 0 ? i.path.join(".") : "body"
    const message = i._tag === "Type" && i.message.startsWith("Expected {")
      ? `expected {"inputs": [[${Mlp.INPUT} numbers], ...]}`
      : i.message
    return `${where}: ${message}`
  }).join("; ")

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const

/** every other method on `path` answers 405 with `Allow` (a route per method: `all` would clash with the path's) */
const onlyMethod = (path: HttpRouter.PathInput, allow: (typeof METHODS)[number]) =>
<E, R>(
  router: HttpRouter.HttpRouter<E, R>
): HttpRouter.HttpRouter<E, R> =>
  METHODS.filter((m) => m !== allow).reduce(
    (r, method) => HttpRouter.route(method)(path, Effect.succeed(error(405, `use ${allow}`, { allow })))(r),
    router
  )

export const router = HttpRouter.empty.pipe(
  HttpRouter.get(
    "/health",
    Effect.flatMap(Inference, (i) => Effect.map(i.device, (device) => HttpServerResponse.unsafeJson({ device })))
  ),
  HttpRouter.post(
    "/infer",
    Effect.gen(function*() {
      const json = yield* jsonBody
      const body = yield* Schema.decodeUnknown(InferRequest)(json)
      const inference = yield* Inference
      const prediction = yield* inference.infer(body.inputs)
      return HttpServerResponse.unsafeJson(prediction)
    }).pipe(
      Effect.catchTags({
        TooLarge: (e) => Effect.succeed(error(413, `the body is over ${e.limit} bytes`)),
        Malformed: (e) => Effect.succeed(error(400, `malformed JSON: ${e.reason}`)),
        ParseError: (e) => Effect.succeed(error(400, describeParse(e))),
        RequestError: (e) => Effect.succeed(error(400, `unreadable body: ${e.message}`)),
        DeviceLost: (e) => Effect.succeed(error(503, `${e.message}; the model is being reloaded, try again`))
      }),
      Effect.catchAll((e) => Effect.succeed(error(500, e.message)))
    )
  ),
  onlyMethod("/health", "GET"),
  onlyMethod("/infer", "POST")
)

export const app = HttpServer.serve(router).pipe(HttpServer.withLogAddress)

export type ServerLayer = Layer.Layer<never, never, HttpServer.HttpServer | Inference>
