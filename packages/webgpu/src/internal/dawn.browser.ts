/**
 * Browsers have no Dawn to load: WebGPU is navigator.gpu or nothing (package.json "imports" picks this
 * module under the "browser" condition).
 *
 * @internal
 */

/** @internal: fails, saying how to get WebGPU */
export const load = (_flags: ReadonlyArray<string>): Promise<GPU> =>
  Promise.reject(
    new Error(
      "this browser offers no WebGPU (navigator.gpu is undefined): use a browser with WebGPU enabled " +
        "(Chrome or Edge 113+, Safari 26+, or Chrome with --enable-unsafe-webgpu where it is off) on https " +
        "or localhost, or run on the CPU backend"
    )
  )
