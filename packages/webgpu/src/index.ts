/**
 * @since 0.1.0
 */
export * as WebGpu from "./WebGpu.js"
/**
 * @since 0.1.0
 */
export * as WebGpuDevice from "./WebGpuDevice.js"
