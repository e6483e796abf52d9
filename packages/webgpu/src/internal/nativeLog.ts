/**
 * Dawn (npm `webgpu`) writes some messages straight to the process's stderr from native code: limits it
 * lowered for an adapter, the Vulkan loader's complaints when no driver is found. `captureStderr` runs an
 * opening of adapters and devices with file descriptor 2 pointed at a temporary file and hands that text
 * back, so it goes to Effect's logger at debug level instead of the user's terminal. Node has no dup2, so
 * stderr is saved by reopening /dev/fd/2: this works where stderr is a terminal, a file or a pipe (not a
 * socket, as a Node parent's pipes are), on Linux and macOS. Not where stderr is the file stdout writes too
 * (`> log 2>&1`): the reopened file has an offset of its own, so stdout's writes would land over stderr's;
 * there, elsewhere and in browsers the work runs as it is and Dawn prints as before.
 *
 * @internal
 */
import * as Effect from "effect/Effect"

interface NodeFs {
  readonly openSync: (path: string, flags: string) => number
  readonly closeSync: (fd: number) => void
  readonly readFileSync: (path: string, encoding: "utf8") => string
  readonly unlinkSync: (path: string) => void
  readonly existsSync: (path: string) => boolean
  readonly fstatSync: (fd: number) => { readonly isFile: () => boolean; readonly dev: number; readonly ino: number }
}

/** whether stderr is the regular file stdout writes too (or cannot be told) */
const sharedWithStdout = (fs: NodeFs) => {
  try {
    const [out, err] = [fs.fstatSync(1), fs.fstatSync(2)]
    return err.isFile() && out.dev === err.dev && out.ino === err.ino
  } catch {
    return true
  }
}

const nodeFs = (): Promise<NodeFs | undefined> => {
  const proc = (globalThis as { process?: { platform?: string; versions?: { node?: string } } }).process
  if (proc?.versions?.node === undefined || proc.platform === "win32") return Promise.resolve(undefined)
  // a computed specifier: bundlers for the browser leave it alone
  const specifier = "node:fs"
  return import(/* @vite-ignore */ specifier).then(
    (fs: NodeFs) => (fs.existsSync("/dev/fd/2") && !sharedWithStdout(fs) ? fs : undefined),
    () => undefined
  )
}

/** one capture at a time: two would each move fd 2 under the other */
let queue: Promise<unknown> = Promise.resolve()

/**
 * Points fd 2 at a file while `work` runs, then back; the file's text comes back with the result. Any
 * failure to redirect leaves stderr as it was and runs `work` anyway.
 */
const redirect = async <A>(fs: NodeFs, work: () => Promise<A>): Promise<Captured<A>> => {
  const file = `/tmp/effect-gpu-dawn-${process.pid}-${Math.random().toString(36).slice(2)}.log`
  let saved: number | undefined
  try {
    saved = fs.openSync("/dev/fd/2", "a")
    fs.closeSync(2)
    const fd = fs.openSync(file, "w")
    if (fd !== 2) {
      // fd 2 was not the lowest free descriptor: put stderr back and run without capturing
      fs.closeSync(fd)
      fs.openSync(`/dev/fd/${saved}`, "a")
      fs.closeSync(saved)
      fs.unlinkSync(file)
      return { value: await work(), text: "" }
    }
  } catch {
    if (saved !== undefined) fs.closeSync(saved)
    return { value: await work(), text: "" }
  }
  const restore = () => {
    fs.closeSync(2)
    fs.openSync(`/dev/fd/${saved}`, "a")
    fs.closeSync(saved!)
    const text = fs.readFileSync(file, "utf8")
    fs.unlinkSync(file)
    return text
  }
  try {
    const value = await work()
    return { value, text: restore() }
  } catch (e) {
    restore()
    throw e
  }
}

interface Captured<A> {
  readonly value: A
  readonly text: string
}

/**
 * @internal: runs `work` with Dawn's native stderr messages captured, then logs them at debug level
 */
export const captureStderr = <A, E>(
  work: () => Promise<A>,
  onError: (cause: unknown) => E
): Effect.Effect<A, E> =>
  Effect.flatMap(
    Effect.tryPromise({
      try: () => {
        const run = async (): Promise<Captured<A>> => {
          const fs = await nodeFs()
          return fs === undefined ? { value: await work(), text: "" } : redirect(fs, work)
        }
        const next = queue.then(run, run)
        queue = next.catch(() => undefined)
        return next
      },
      catch: onError
    }),
    ({ text, value }) => Effect.as(logNative(text), value)
  )

/** logs what Dawn wrote, one debug line per message */
const logNative = (text: string): Effect.Effect<void> =>
  Effect.forEach(
    text.split("\n").filter((line) => line.trim() !== ""),
    (line) => Effect.logDebug(`dawn: ${line}`),
    { discard: true }
  )
