/**
 * The WebGPU provider: finds an adapter (Dawn in Node, navigator.gpu in browsers), opens one GPUDevice per
 * logical device, and registers them in the Registry next to the CPU. `devices: n` (or the Config
 * variable EFFECT_GPU_WEBGPU_DEVICES) gives n logical devices "WebGPU0".."WebGPU{n-1}" over one adapter,
 * as GGML_METAL_DEVICES does. Every GPUDevice is destroyed when the layer's scope closes.
 *
 * @since 0.1.0
 */
import * as Cpu from "@effect-gpu/core/Cpu"
import * as Device from "@effect-gpu/core/Device"
import { NoAdapter } from "@effect-gpu/core/GpuError"
import * as Registry from "@effect-gpu/core/Registry"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Gpu from "./internal/gpu.js"
import { captureStderr } from "./internal/nativeLog.js"
import * as WebGpuDevice from "./WebGpuDevice.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** logical devices over the adapter; default: EFFECT_GPU_WEBGPU_DEVICES, else 1 */
  readonly devices?: number | undefined
  /**
   * the devices share one GPUDevice and its queue (virtual devices of one GPU): copies between them stay
   * on the GPU, ordered by the queue, without events or the host; default: a GPUDevice each (WebGPU
   * shares no buffer between GPUDevices, so their copies pass through the host)
   */
  readonly shareDevice?: boolean | undefined
  /**
   * Dawn toggles to enable (one list: Dawn keeps only the last flag). The default enables f16 on NVIDIA
   * (vulkan_enable_f16_on_nvidia), experimental features such as subgroup matrices (allow_unsafe_apis),
   * and turns robustness off (disable_robustness, see `robustness`). The Config EFFECT_GPU_WEBGPU_TOGGLES
   * (comma-separated) adds to either list.
   */
  readonly toggles?: ReadonlyArray<string> | undefined
  /**
   * Dawn's bounds checks on every buffer and workgroup-array index (WebGPU's robustness; browsers keep it
   * whatever is asked). Default: off in Node (the `disable_robustness` toggle among defaultToggles), as
   * native backends run: the kernels keep their own indices in range (the conformance suite checks them),
   * and the checks slowed a model's prompts and decoding (benchmarks/RESULTS.md). `true` drops the toggle,
   * `false` adds it to toggles of one's own.
   */
  readonly robustness?: boolean | undefined
  /** Dawn toggles to disable; default: timestamp_quantization (exact timings in traces) */
  readonly disabledToggles?: ReadonlyArray<string> | undefined
  readonly powerPreference?: GPUPowerPreference | undefined
  /** use only an adapter whose name or description contains this */
  readonly adapter?: string | undefined
  /** bytes each device may hold; default: the adapter's maxBufferSize */
  readonly memory?: number | undefined
  /** ggml's op_offload_min_batch_size; default 32 */
  readonly offloadMinBatch?: number | undefined
  /** @internal the subgroup-matrix tiling of f16 mul_mat, for tuning experiments */
  readonly matrixTile?: WebGpuDevice.Options["matrixTile"]
  /** @internal which result tiles neighbouring workgroups of a subgroup-matrix product take, for tests and tuning */
  readonly matrixOrder?: WebGpuDevice.Options["matrixOrder"]
  /** @internal 96 x 128 tiles where they fill fewer waves of workgroups, for tests and tuning */
  readonly fillTiles?: WebGpuDevice.Options["fillTiles"]
  /** @internal which blocks neighbouring workgroups of a register-tiled product take, for tests and tuning */
  readonly registerOrder?: WebGpuDevice.Options["registerOrder"]
  /** @internal false leaves the adapter's subgroup matrices unused (as a browser's adapter), for tests and tuning */
  readonly subgroupMatrices?: WebGpuDevice.Options["subgroupMatrices"]
  /** @internal the register tiling of the vec4 mul_mat kernel, for tuning experiments */
  readonly registerTile?: WebGpuDevice.Options["registerTile"]
  /** @internal the quantized matrix-vector kernel's rows per lane group and most columns, for tests and tuning */
  readonly quantizedDecode?: WebGpuDevice.Options["quantizedDecode"]
  /** @internal flash attention's decode form (splits, block, subgroups), for tests and tuning */
  readonly attentionDecode?: WebGpuDevice.Options["attentionDecode"]
  /** @internal flash attention's matrix form for prompts (one pass or two, subgroups), for tests and tuning */
  readonly attentionPrefill?: WebGpuDevice.Options["attentionPrefill"]
  /** @internal a quantized prompt product's weights dequantized in its tiles or copied into f16 first, for tests and tuning */
  readonly quantizedPrefill?: WebGpuDevice.Options["quantizedPrefill"]
  /** @internal how the f16 copy of q4_0 / q8_0 weights stages its runs (a word or 16 bytes a load), for tests and tuning */
  readonly copyLoads?: WebGpuDevice.Options["copyLoads"]
  /** @internal the f16 copy's vec4s a thread and store width, for tests and tuning */
  readonly copyShape?: WebGpuDevice.Options["copyShape"]
  /** @internal short fixed loops written out (the GPU form) or not, for tests */
  readonly writeOut?: WebGpuDevice.Options["writeOut"]
  /** @internal the invocations of a row kernel's workgroup, for tests and tuning */
  readonly rowThreads?: WebGpuDevice.Options["rowThreads"]
  /** @internal how a product making its own norm reduces the row's squares (subgroups or a tree), for tests and tuning */
  readonly normReduce?: WebGpuDevice.Options["normReduce"]
  /** @internal a prompt's activations in f16 for products on subgroup matrices (default on), for measuring */
  readonly halfActivations?: WebGpuDevice.Options["halfActivations"]
  /** @internal a layer's values stored by its keys' rope_set_rows dispatch (default on), for tests and measuring */
  readonly storeValuesWithKeys?: WebGpuDevice.Options["storeValuesWithKeys"]
  /** @internal a layer's keys and values stored by its q/k/v stack's dispatch (default on), for tests and measuring */
  readonly storeKeysInProducts?: WebGpuDevice.Options["storeKeysInProducts"]
  /** @internal a residual sum and its norm made by the product that reads the norm (default: rows up to 4096), for tests and measuring */
  readonly normsInProducts?: WebGpuDevice.Options["normsInProducts"]
  /** @internal attention's split partials merged by the product that reads them (default: outputs up to 2048), for tests and measuring */
  readonly mergesInProducts?: WebGpuDevice.Options["mergesInProducts"]
  /** @internal a prompt's gate and up products and their swiglu as one product (default: not on subgroup matrices), for tests and measuring */
  readonly gatedPrompts?: WebGpuDevice.Options["gatedPrompts"]
  /** @internal a prompt's residual sums made by the norms reading them (default on), for tests and measuring */
  readonly sumsInNorms?: WebGpuDevice.Options["sumsInNorms"]
  /** @internal a product read only by a permuted contiguous copy stores its result so (default on), for tests and measuring */
  readonly permutedResults?: WebGpuDevice.Options["permutedResults"]
  /** @internal a split-K product's partial sums added by the norm reading them (default on), for tests and measuring */
  readonly splitsInNorms?: WebGpuDevice.Options["splitsInNorms"]
  /** @internal a query's rope made by the keys' and values' store after it (default on), for tests and measuring */
  readonly queryRopesInStores?: WebGpuDevice.Options["queryRopesInStores"]
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultToggles: ReadonlyArray<string> = [
  "allow_unsafe_apis",
  "vulkan_enable_f16_on_nvidia",
  "disable_robustness"
]

/**
 * Dawn toggles disabled by default: timestamp_quantization, which rounds GPU timestamps to 2^16 ns
 * (65.5 us) and would hide every kernel shorter than that in traces.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultDisabledToggles: ReadonlyArray<string> = ["timestamp_quantization"]

/**
 * The flags for Dawn's `create` (npm `webgpu`): one `enable-dawn-features` and one
 * `disable-dawn-features` entry, for code that makes its own instance and hands it over as
 * `navigator.gpu` (benchmarks that run a peer library on the same adapter).
 *
 * @since 0.1.0
 * @category constructors
 */
export const dawnFlags = (
  toggles: ReadonlyArray<string> = defaultToggles,
  disabled: ReadonlyArray<string> = defaultDisabledToggles
): ReadonlyArray<string> => [
  ...(toggles.length > 0 ? [`enable-dawn-features=${toggles.join(",")}`] : []),
  ...(disabled.length > 0 ? [`disable-dawn-features=${disabled.join(",")}`] : [])
]

/** features we use when the adapter has them */
const wanted: ReadonlyArray<GPUFeatureName> = [
  "shader-f16",
  "subgroups",
  "timestamp-query",
  "chromium-experimental-subgroup-matrix" as GPUFeatureName
]

const describeAdapter = (a: GPUAdapter): string => {
  const i = a.info
  return [i.vendor, i.architecture, i.device, i.description].filter((s) => s !== undefined && s !== "").join(" ")
}

/** a GPUDevice of a fresh adapter, destroyed when the scope closes */
const openGpuDevice = (gpu: GPU, options: Options, index: number) =>
  Effect.gen(function*() {
    // a fresh adapter per device: Dawn hands out a lost device from an adapter used before
    // Dawn's native messages (limits it lowered, the Vulkan loader's complaints) go to the debug log
    const adapter = yield* captureStderr(
      () => gpu.requestAdapter(options.powerPreference ? { powerPreference: options.powerPreference } : {}),
      (cause) => new NoAdapter({ reason: `requestAdapter failed: ${cause}`, cause })
    )
    if (adapter === null) return yield* new NoAdapter({ reason: "no WebGPU adapter is available" })
    const description = describeAdapter(adapter)
    if (options.adapter !== undefined && !description.toLowerCase().includes(options.adapter.toLowerCase())) {
      return yield* new NoAdapter({ reason: `the adapter is "${description}", not "${options.adapter}"` })
    }
    const requiredFeatures = wanted.filter((f) => adapter.features.has(f))
    const l = adapter.limits
    const requiredLimits: Record<string, number> = {
      maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
      maxBufferSize: l.maxBufferSize,
      maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
      maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
      maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
      maxComputeWorkgroupSizeY: l.maxComputeWorkgroupSizeY
    }
    const gpuDevice = yield* Effect.acquireRelease(
      captureStderr(
        () => adapter.requestDevice({ requiredFeatures, requiredLimits, label: `WebGPU${index}` }),
        (cause) => new NoAdapter({ reason: `requestDevice failed on ${description}: ${cause}`, cause })
      ),
      (d) => Effect.sync(() => d.destroy())
    )
    return {
      adapter,
      gpuDevice,
      description: `${description} (${requiredFeatures.join(", ") || "no optional features"})`
    }
  })

/** the device `index` on a GPUDevice, released (refusing new work) before the GPUDevice is destroyed */
const wrapDevice = (
  gpu: GPU,
  options: Options,
  index: number,
  { adapter, description, gpuDevice }: Effect.Effect.Success<ReturnType<typeof openGpuDevice>>,
  queue: string | undefined
): Effect.Effect<Device.Device, never, Scope.Scope> =>
  Effect.gen(function*() {
    const device = WebGpuDevice.make(gpuDevice, {
      name: `WebGPU${index}`,
      description,
      queue,
      memory: options.memory,
      offloadMinBatch: options.offloadMinBatch,
      adapterInfo: adapter.info as WebGpuDevice.AdapterInfo,
      wgslFeatures: gpu.wgslLanguageFeatures,
      matrixTile: options.matrixTile,
      matrixOrder: options.matrixOrder,
      fillTiles: options.fillTiles,
      registerOrder: options.registerOrder,
      subgroupMatrices: options.subgroupMatrices,
      registerTile: options.registerTile,
      quantizedDecode: options.quantizedDecode,
      attentionDecode: options.attentionDecode,
      attentionPrefill: options.attentionPrefill,
      quantizedPrefill: options.quantizedPrefill,
      copyLoads: options.copyLoads,
      copyShape: options.copyShape,
      writeOut: options.writeOut,
      rowThreads: options.rowThreads,
      normReduce: options.normReduce,
      halfActivations: options.halfActivations,
      storeValuesWithKeys: options.storeValuesWithKeys,
      storeKeysInProducts: options.storeKeysInProducts,
      normsInProducts: options.normsInProducts,
      mergesInProducts: options.mergesInProducts,
      gatedPrompts: options.gatedPrompts,
      sumsInNorms: options.sumsInNorms,
      permutedResults: options.permutedResults,
      splitsInNorms: options.splitsInNorms,
      queryRopesInStores: options.queryRopesInStores
    })
    // runs before the GPUDevice is destroyed: from then on the device refuses new backends and events
    yield* Effect.addFinalizer(() => Device.markReleased(device))
    return device
  })

/**
 * Opens the logical devices, for the life of the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<ReadonlyArray<Device.Device>, NoAdapter | ConfigError.ConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const n = options.devices ?? (yield* Config.integer("EFFECT_GPU_WEBGPU_DEVICES").pipe(Config.withDefault(1)))
    if (!Number.isInteger(n) || n < 1 || n > 16) {
      return yield* new NoAdapter({ reason: `devices must be an integer in [1, 16], got ${n}` })
    }
    // toggles from the environment added to the options' (a whole run with one changed, as a test suite)
    const extra = yield* Config.array(Config.string(), "EFFECT_GPU_WEBGPU_TOGGLES").pipe(Config.withDefault([]))
    const toggles = Gpu.toggles(options.toggles ?? defaultToggles, options.robustness, extra)
    const gpu = yield* Gpu.acquire(dawnFlags(toggles, options.disabledToggles))
    const devices: Array<Device.Device> = []
    if (options.shareDevice === true) {
      // one GPUDevice for all: its finalizer runs after every device's (scopes close in reverse)
      const shared = yield* openGpuDevice(gpu, options, 0)
      for (let i = 0; i < n; i++) {
        devices.push(yield* wrapDevice(gpu, options, i, shared, n > 1 ? "WebGPU0" : undefined))
      }
    } else {
      for (let i = 0; i < n; i++) {
        devices.push(yield* wrapDevice(gpu, options, i, yield* openGpuDevice(gpu, options, i), undefined))
      }
    }
    return devices
  }).pipe(Effect.withSpan("WebGpu.make", { captureStackTrace: false }))

/**
 * Registers the WebGPU devices into the registry.
 *
 * @since 0.1.0
 * @category layers
 */
export const register = (
  options: Options = {}
): Layer.Layer<never, NoAdapter | ConfigError.ConfigError, Registry.Registry> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const registry = yield* Registry.Registry
    for (const d of yield* make(options)) yield* registry.register(d)
  }))

/**
 * A registry with the WebGPU devices and the CPU; fails with NoAdapter when there is no adapter.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Registry.Registry, NoAdapter | ConfigError.ConfigError> =>
  Layer.merge(register(options), Cpu.register()).pipe(Layer.provideMerge(Registry.layer))

/**
 * The WebGPU devices when an adapter exists, else the CPU alone.
 *
 * @example
 * ```ts
 * import { Graph, Ops, Registry } from "@effect-gpu/core"
 * import { WebGpu } from "@effect-gpu/webgpu"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const device = yield* Registry.bestDevice // WebGPU0 where an adapter exists, else the CPU
 *   const backend = yield* device.makeBackend()
 *   const g = Graph.make()
 *   const x = yield* g.input("x", "f32", [1024, 4])
 *   const y = yield* g.output(Ops.softMax(x))
 *   const plan = yield* backend.allocate(g)
 *   yield* plan.set(x, new Float32Array(4096).fill(1))
 *   yield* backend.compute(plan)
 *   return (yield* plan.get(y))[0] // 1 / 1024
 * })
 *
 * Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(WebGpu.layerOrCpu())))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerOrCpu = (options: Options = {}): Layer.Layer<Registry.Registry, ConfigError.ConfigError> =>
  Layer.merge(
    register(options).pipe(
      Layer.catchAll((e) => e._tag === "NoAdapter" ? Layer.empty : Layer.fail(e))
    ),
    Cpu.register()
  ).pipe(Layer.provideMerge(Registry.layer))

/**
 * `layer`, with the options read from Config (e.g. EFFECT_GPU_WEBGPU_DEVICES, EFFECT_GPU_WEBGPU_ADAPTER).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<Options>
): Layer.Layer<Registry.Registry, NoAdapter | ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.map(Config.unwrap(config), layer))
