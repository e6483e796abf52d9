/**
 * Graphs computed on a GPU and on the CPU backend with the same inputs, for the probes that check kernels
 * against the CPU (kernel-check.ts): their outputs and the NMSE between them. Not project code: measuring
 * aids.
 */
import type { Graph } from "@effect-gpu/core"
import * as Cpu from "@effect-gpu/core/Cpu"
import type * as Device from "@effect-gpu/core/Device"
import type * as Tensor from "@effect-gpu/core/Tensor"
import { nmse } from "@effect-gpu/testing/Compare"
import { Effect } from "effect"

/**
 * a graph's outputs `ys` on `gpu` and on the CPU with the same inputs, each fused as its backend fuses it:
 * the GPU's kernels (as its trace names them) and both sides' values
 */
export const outputsOf = (
  gpu: Device.Device,
  g: Graph.Builder,
  ys: ReadonlyArray<Tensor.Tensor>,
  inputs: ReadonlyArray<readonly [Tensor.Tensor, Float32Array | Uint8Array | Int32Array]>
) =>
  Effect.gen(function*() {
    const results: Array<Array<Array<number>>> = []
    let kernels = ""
    for (const device of [gpu, Cpu.make()]) {
      const backend = yield* device.makeBackend()
      // fused as a model's graph is (a product and its bias: mul_mat_add)
      const plan = yield* backend.allocate(backend.optimize(g.build()))
      for (const [t, values] of inputs) yield* plan.set(t, values)
      const trace = yield* backend.captureNext
      yield* backend.compute(plan)
      if (device === gpu) kernels = (yield* trace).entries.map((e) => e.kernel).join(" + ")
      results.push(yield* Effect.forEach(ys, (y) => plan.get(y).pipe(Effect.map((v) => Array.from(v)))))
    }
    return { kernels, gpu: results[0], cpu: results[1] }
  })

/** outputsOf for one output: the kernels and the NMSE between the two */
export const against = (
  gpu: Device.Device,
  g: Graph.Builder,
  y: Tensor.Tensor,
  inputs: ReadonlyArray<readonly [Tensor.Tensor, Float32Array | Uint8Array | Int32Array]>
) => Effect.map(outputsOf(gpu, g, [y], inputs), (r) => ({ kernels: r.kernels, error: nmse(r.gpu[0], r.cpu[0]) }))
