/**
 * Dawn for Node (npm `webgpu`, an optional peer): loaded on first use. Browsers get dawn.browser.ts
 * instead (package.json "imports", condition "browser"), so bundles never pull Dawn's Node-only code.
 *
 * @internal
 */

/** @internal: a Dawn GPU with these toggles, Dawn's globals (GPUBufferUsage, ...) installed */
export const load = (flags: ReadonlyArray<string>): Promise<GPU> =>
  import("webgpu").then(
    (m) => {
      Object.assign(globalThis, m.globals)
      return m.create([...flags])
    },
    (cause: unknown) => {
      const code = (cause as { code?: string }).code
      throw code === "ERR_MODULE_NOT_FOUND"
        ? new Error(
          "no WebGPU here: Node has no navigator.gpu and the npm package webgpu (Dawn, an optional peer of " +
            "@effect-gpu/webgpu) is not installed: npm install webgpu@0.6.2, or run on the CPU backend",
          { cause }
        )
        : cause
    }
  )
