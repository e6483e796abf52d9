/**
 * Where the GPU comes from: `navigator.gpu` in browsers, Dawn (npm `webgpu`) in Node. One Dawn instance
 * per set of toggles for the process: Dawn's flags are process-level and the instance cannot be
 * released safely (node-webgpu issue 18).
 *
 * @internal
 */
import * as Dawn from "#dawn"
import { NoAdapter } from "@effect-gpu/core/GpuError"
import * as Effect from "effect/Effect"

const instances = new Map<string, Promise<GPU>>()

/**
 * @internal: the toggles a device opens with: the options' (or the defaults), with disable_robustness
 * dropped where robustness is asked for and added where it is turned off, then those the environment adds
 * (empty entries dropped)
 */
export const toggles = (
  base: ReadonlyArray<string>,
  robustness: boolean | undefined,
  extra: ReadonlyArray<string>
): ReadonlyArray<string> => [
  ...base.filter((t) => robustness !== true || t !== "disable_robustness"),
  ...(robustness === false && !base.includes("disable_robustness") ? ["disable_robustness"] : []),
  ...extra.filter((t) => t.length > 0)
]

/** @internal */
export const acquire = (flags: ReadonlyArray<string>): Effect.Effect<GPU, NoAdapter> =>
  Effect.tryPromise({
    try: () => {
      const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator
      if (nav?.gpu !== undefined) return Promise.resolve(nav.gpu)
      const key = flags.join(" ")
      let p = instances.get(key)
      if (p === undefined) {
        p = Dawn.load(flags)
        instances.set(key, p)
      }
      return p
    },
    catch: (cause) =>
      new NoAdapter({ reason: cause instanceof Error ? cause.message : `cannot load WebGPU: ${cause}`, cause })
  })
