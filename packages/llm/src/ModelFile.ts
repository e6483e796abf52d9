/**
 * A GGUF file opened through `@effect/platform`'s FileSystem, or over a Blob in a browser: its header read
 * from the first bytes (more as needed), its tensors read by offset, so that a model larger than one buffer
 * (or than memory) loads.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Gguf from "./Gguf.js"
import { ModelError } from "./ModelError.js"
import * as Weights from "./Weights.js"

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
    return yield* fromSource(path, { size, read }, options)
  })

/**
 * A GGUF file over any source of its bytes: its header read from the first bytes (more as needed); a file
 * that is not GGUF fails with ModelError naming `file`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromSource = (
  file: string,
  source: Weights.Source,
  options: { readonly headerBytes?: number } = {}
): Effect.Effect<ModelFile, ModelError> =>
  Effect.gen(function*() {
    // the header's length is not known before it is read: start with 16 MiB (vocabularies are large)
    let prefix = Math.min(source.size, options.headerBytes ?? 16 * 1024 * 1024)
    for (;;) {
      const head = yield* source.read(0, prefix)
      const parsed = yield* Effect.either(Gguf.parse(head, { file, size: source.size }))
      if (parsed._tag === "Right") return { path: file, gguf: parsed.right, source }
      if (prefix >= source.size || !parsed.left.problem.includes(`the file has ${prefix}`)) return yield* parsed.left
      prefix = Math.min(source.size, prefix * 4)
    }
  })

/**
 * A GGUF file in a Blob (a browser's File from a file input, a fetched Response's blob), read a slice at a
 * time (Weights.fromBlob); `file` names it in failures (default: a File's name).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromBlob = (
  blob: Blob,
  options: { readonly file?: string; readonly headerBytes?: number } = {}
): Effect.Effect<ModelFile, ModelError> => {
  const file = options.file ?? ("name" in blob && typeof blob.name === "string" ? blob.name : "<blob>")
  return fromSource(file, Weights.fromBlob(blob, file), options)
}
