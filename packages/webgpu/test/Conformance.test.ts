import { ConformanceSuite } from "@effect-gpu/testing/vitest"
import { WebGpu } from "@effect-gpu/webgpu"
import { adapterAvailable } from "./utils.js"

ConformanceSuite.conformance(WebGpu.layer({ devices: 1 }), {
  device: "WebGPU0",
  f16: true,
  skip: !adapterAvailable
})
