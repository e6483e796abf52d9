import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"

/**
 * Whether a WebGPU adapter exists here. Without one the GPU tests are skipped with one message, except
 * under CI=true, where CI installs lavapipe and a missing adapter means a broken setup: that fails.
 */
export const adapterAvailable: boolean = await Effect.runPromise(
  Effect.scoped(WebGpu.make({ devices: 1 })).pipe(
    Effect.as(true),
    Effect.catchAll((e) => {
      if (process.env.CI === "true") {
        return Effect.die(new Error(`CI=true and no WebGPU adapter: ${e.message}`))
      }
      return Effect.sync(() => {
        if (!(globalThis as { __gpuSkipNoted?: boolean }).__gpuSkipNoted) {
          ;(globalThis as { __gpuSkipNoted?: boolean }).__gpuSkipNoted = true
          process.stderr.write(`no WebGPU adapter (${e.message}): GPU tests are skipped\n`)
        }
        return false
      })
    })
  )
)
