import { inject } from "vitest"

/** whether a WebGPU adapter exists here: probed once per run by globalSetup.ts */
export const adapterAvailable: boolean = inject("webgpuAdapter")
