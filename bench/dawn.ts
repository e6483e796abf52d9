/**
 * One Dawn instance per benchmark process, made with the provider's flags (timestamps not quantized)
 * plus any extra toggles, and handed over as `navigator.gpu` so that our provider and a peer library
 * share the same adapter.
 */
import { WebGpu } from "@effect-gpu/webgpu"

export const openDawn = async (extraToggles: ReadonlyArray<string> = []): Promise<GPU> => {
  const webgpu = await import("webgpu")
  Object.assign(globalThis, webgpu.globals)
  const gpu = webgpu.create([...WebGpu.dawnFlags([...WebGpu.defaultToggles, ...extraToggles])])
  ;(globalThis as { navigator?: unknown }).navigator = { gpu }
  return gpu
}
