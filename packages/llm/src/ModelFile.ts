/**
 * A GGUF file opened through `@effect/platform`'s FileSystem: its header read from the first bytes (more
 * as needed), its tensors read by offset, so that a model larger than one buffer (or than memory) loads.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Gguf from "./Gguf.js"
import { ModelError } from "./ModelError.js"
import type * as Weights from "./Weights.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface ModelFile {
  readonly path: string
  readonly gguf: Gguf.GgufFile
  readonly source: Weights.Source
}

/**
 * Opens `path` for as long as the scope; a missing or unreadable file, or one that is not GGUF, fails with
 * ModelError.
 *
 * @since 0.1.0
 * @category constructors
 */
export const open = (
  path: string,
  options: { readonly headerBytes?: number } = {}
): Effect.Effect<ModelFile, ModelError, FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const fail = (problem: string) => new ModelError({ file: path, problem })
    const file = yield* fs.open(path, { flag: "r" }).pipe(
      Effect.mapError((e) => fail(`cannot be opened: ${e.message}`))
    )
    const info = yield* file.stat.pipe(Effect.mapError((e) => fail(e.message)))
    // a folder opens for reading on some systems and fails only at the first read, with the system's code
    if (info.type !== "File") return yield* fail(`is a ${info.type.toLowerCase()}, not a file`)
    const size = Number(info.size)
    // one reader at a time: a read is a seek and a read
    const lock = yield* Effect.makeSemaphore(1)
    const read = (offset: number, length: number) =>
      lock.withPermits(1)(Effect.gen(function*() {
        yield* file.seek(offset, "start")
        const bytes = yield* file.readAlloc(length).pipe(Effect.mapError((e) => fail(e.message)))
        const got = Option.getOrElse(bytes, () => new Uint8Array(0))
        if (got.byteLength < length) {
          return yield* fail(`truncated: ${length} bytes at ${offset} were asked, ${got.byteLength} were there`)
        }
        return got
      }))
    // the header's length is not known before it is read: start with 16 MiB (vocabularies are large)
    let prefix = Math.min(size, options.headerBytes ?? 16 * 1024 * 1024)
    for (;;) {
      const head = yield* read(0, prefix)
      const parsed = yield* Effect.either(Gguf.parse(head, { file: path, size }))
      if (parsed._tag === "Right") return { path, gguf: parsed.right, source: { size, read } }
      if (prefix >= size || !parsed.left.problem.includes(`the file has ${prefix}`)) return yield* parsed.left
      prefix = Math.min(size, prefix * 4)
    }
  })
