import type { Device, DType, Plan, Tensor } from "@effect-gpu/core"
import { Cpu, Graph, Ops, Quant } from "@effect-gpu/core"
import type { Trace } from "@effect-gpu/core"
import { Generators } from "@effect-gpu/testing"
import { WebGpu, WebGpuDevice } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { inject } from "vitest"
import type { KernelTarget, QuantizedDecode } from "../src/internal/kernels/kernel.js"

/** whether a WebGPU adapter exists here: probed once per run by globalSetup.ts */
export const adapterAvailable: boolean = inject("webgpuAdapter")

/**
 * a GPU with subgroup matrices and an H200's workgroup limits, for the kernels lavapipe lacks, generated
 * without an adapter
 */
export const matrixGpu: KernelTarget = {
  f16: true,
  maxWorkgroups: 65535,
  subgroups: true,
  subgroupMatrix: true,
  workgroupStorage: 49152,
  workgroupInvocations: 1024
}

/**
 * one WebGPU device whose decode kernels take the int8 form's `int8` choices (the quantized kernel's own
 * shape kept small: a row a lane group, one column, one stage of b), with the device `options` besides
 */
export const int8Device = (
  int8: Omit<QuantizedDecode, "rows" | "columns" | "stage">,
  options: Omit<WebGpu.Options, "devices" | "quantizedDecode"> = {}
) =>
  Effect.map(
    WebGpu.make({ ...options, devices: 1, quantizedDecode: { rows: 1, columns: 1, stage: 1, ...int8 } }),
    ([device]) => device
  )

/** whether `device` offers the int8 form (dot4I8Packed); says so where it does not, for a test to end there */
export const offersInt8 = (device: Device.Device): boolean => {
  if (WebGpuDevice.hasInt8Dot(device)) return true
  console.log(`no dot4I8Packed on ${device.description}: the int8 form is not offered`)
  return false
}

/** a small two-layer graph: enough nodes and work to see ordering and aborts */
export const mlp = (n: number, layers: number) =>
  Effect.gen(function*() {
    const g = Graph.make()
    const x = yield* g.input("x", "f32", [n, n])
    let h: Tensor.Tensor = x
    for (let i = 0; i < layers; i++) h = yield* Ops.softMax(Ops.add(Ops.mulMat(h, x), x), { scale: 0.1 })
    const y = yield* g.output(h, "y")
    return { g, x, y }
  })

export const runOn = (device: Device.Device, n: number, layers: number, seed: number, commandBuffers = 1) =>
  Effect.gen(function*() {
    const { g, x, y } = yield* mlp(n, layers)
    const backend = yield* device.makeBackend()
    const plan = yield* backend.allocate(g)
    yield* plan.set(x, Generators.values(seed, n * n))
    yield* backend.compute(plan, { commandBuffers })
    return Array.from(yield* plan.get(y))
  })

/** wall-clock sleep: the layer's tests run under the TestClock */
export const realSleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

export const nmse = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => {
  let num = 0
  let den = 0
  for (let i = 0; i < b.length; i++) {
    num += (a[i] - b[i]) ** 2
    den += b[i] ** 2
  }
  return num / den
}

/**
 * a product of a's view (from a's second row where `shifted`: an offset off 16-byte boundaries) and b,
 * with a row bias where asked, fused as a model's graph is, on `device` and on the CPU with the same
 * inputs: the device's product dispatches (mul_mat, mul_mat_add) and both results
 */
export const productOnBoth = (
  device: Device.Device,
  p: {
    readonly dtype: "f32" | "f16" | DType.Quantized
    readonly K: number
    readonly M: number
    readonly N: number
    /** a's batches, and b's (a multiple of them) */
    readonly batches: readonly [number, number]
    readonly shifted: boolean
    readonly bias: boolean
    readonly seed: number
  }
) =>
  Effect.gen(function*() {
    const [aBatches, bBatches] = p.batches
    const g = Graph.make()
    const a = yield* g.param("a", p.dtype, [p.K, p.M + 1, aBatches])
    const b = yield* g.input("b", "f32", [p.K, p.N, bBatches])
    const c = yield* g.param("c", "f32", [p.M])
    const w = Ops.view(a, [p.K, p.M, aBatches], [a.nb[1], a.nb[2]], p.shifted ? a.nb[1] : 0)
    const product = Ops.mulMat(w, b)
    const y = yield* g.output(p.bias ? Ops.add(product, c) : product)
    const weights = Generators.values(p.seed, p.K * (p.M + 1) * aBatches)
    const graph = g.build()
    const { cpu, entries, gpu } = yield* fusedOnBoth(
      device,
      graph,
      (plan) =>
        Effect.gen(function*() {
          yield* plan.set(a, p.dtype === "f32" || p.dtype === "f16" ? weights : Quant.unsafeQuantize(p.dtype, weights))
          yield* plan.set(b, Generators.values(p.seed + 1, p.K * p.N * bBatches))
          if (p.bias) yield* plan.set(c, Generators.values(p.seed + 2, p.M))
        }),
      [y]
    )
    return { entries: entries.filter((e) => e.op === "mul_mat" || e.op === "mul_mat_add"), gpu, cpu }
  })

/**
 * `fused` (the device's form of `graph`) computed on `device` and `graph` on the CPU, their inputs set
 * alike by `set`: the device's trace entries, and each side's `outputs` read back one after another
 */
export const onDeviceAndCpu = <E, R>(
  device: Device.Device,
  fused: Graph.Graph,
  graph: Graph.Graph,
  set: (plan: Plan.Plan) => Effect.Effect<void, E, R>,
  outputs: ReadonlyArray<Tensor.Tensor>
) =>
  Effect.gen(function*() {
    const results: Array<Array<number>> = []
    let entries: ReadonlyArray<Trace.Entry> = []
    for (const [dev, h] of [[device, fused], [Cpu.make(), graph]] as const) {
      const backend = yield* dev.makeBackend()
      const plan = yield* backend.allocate(h)
      yield* set(plan)
      const trace = yield* backend.captureNext
      yield* backend.compute(plan)
      if (dev === device) entries = (yield* trace).entries
      const out: Array<number> = []
      for (const y of outputs) for (const v of yield* plan.get(y)) out.push(v)
      results.push(out)
    }
    return { entries, gpu: results[0], cpu: results[1] }
  })

/** `graph` fused as the device fuses it (its backend's optimize) on `device`, and as it is on the CPU (onDeviceAndCpu) */
export const fusedOnBoth = <E, R>(
  device: Device.Device,
  graph: Graph.Graph,
  set: (plan: Plan.Plan) => Effect.Effect<void, E, R>,
  outputs: ReadonlyArray<Tensor.Tensor>
) =>
  Effect.flatMap(
    device.makeBackend(),
    (backend) => onDeviceAndCpu(device, backend.optimize(graph), graph, set, outputs)
  )
