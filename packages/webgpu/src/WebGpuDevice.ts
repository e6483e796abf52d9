/**
 * A core `Device` over one GPUDevice: three buffer types (private device memory, shared with a staging
 * host path, mapped from host bytes), the WebGPU kernel layer as its interpreter, and ggml's device
 * answers (supportsOp, offloadOp, supportsBufferType).
 *
 * @since 0.1.0
 */
import * as BufferType from "@effect-gpu/core/BufferType"
import * as Device from "@effect-gpu/core/Device"
import * as Fusion from "@effect-gpu/core/Fusion"
import * as Ledger from "@effect-gpu/core/Ledger"
import type { Tensor } from "@effect-gpu/core/Tensor"
import * as Option from "effect/Option"
import * as GpuContext from "./internal/context.js"
import * as Interpreter from "./internal/interpreter.js"
import * as Attention from "./internal/kernels/attention.js"
import * as Fused from "./internal/kernels/fusedProducts.js"
import type {
  AttentionDecode,
  AttentionPrefill,
  MatrixTile,
  QuantizedDecode,
  RegisterTile
} from "./internal/kernels/kernel.js"
import * as MatMul from "./internal/kernels/matmul.js"
import * as PermutedResult from "./internal/kernels/permutedResult.js"
import * as Memory from "./internal/memory.js"
import * as Program from "./internal/program.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** the device's name, e.g. "WebGPU0" */
  readonly name: string
  /** bytes the device may hold; default: the adapter's maxBufferSize */
  readonly memory?: number | undefined
  /** mul_mat with at least this many columns (ggml's batch) is worth offloading; default 32 */
  readonly offloadMinBatch?: number | undefined
  /**
   * the queue's name where several devices share this GPUDevice (virtual devices of one GPU): their
   * copies stay on the GPU, ordered by the queue (`Buffer.Memory.queue`); default: a queue of its own
   */
  readonly queue?: string | undefined
  /** dispatches per command buffer at most (abort granularity); default 128 */
  readonly chunk?: number | undefined
  /**
   * the subgroup-matrix tiling of f16 mul_mat (for tuning experiments); default 128x128 per workgroup
   *
   * @internal
   */
  readonly matrixTile?: MatrixTile | undefined
  /**
   * which of a subgroup-matrix product's result tiles neighbouring workgroups take: the column blocks of one
   * row block of the weights (`columns`, so that its rows are read from memory once), or the row blocks of
   * one column block (`rows`) (tests and tuning); default: columns
   *
   * @internal
   */
  readonly matrixOrder?: "rows" | "columns" | undefined
  /**
   * f16 products whose 128 x 128 grid leaves the last wave of workgroups part empty take 96 x 128 tiles
   * where those fill fewer waves (tests and tuning); default: on (benchmarks/RESULTS.md, choices)
   *
   * @internal
   */
  readonly fillTiles?: boolean | undefined
  /**
   * which of a register-tiled product's blocks neighbouring workgroups take, as `matrixOrder` (tests and
   * tuning); default: rows
   *
   * @internal
   */
  readonly registerOrder?: "rows" | "columns" | undefined
  /**
   * false: the kernels leave the adapter's subgroup matrices unused, as on an adapter without them (a
   * browser's, measured on a GPU that has them) (tests and tuning); default: used where offered
   *
   * @internal
   */
  readonly subgroupMatrices?: boolean | undefined
  /**
   * the register tiling of the vec4 mul_mat kernel (for tuning experiments); default: by product size
   *
   * @internal
   */
  readonly registerTile?: RegisterTile | undefined
  /**
   * the quantized matrix-vector kernel's rows per group of lanes and most columns (tests and tuning);
   * default: 2 and 8 on GPUs, 1 and 1 on software adapters
   *
   * @internal
   */
  readonly quantizedDecode?: QuantizedDecode | undefined
  /**
   * flash attention's decode form: key splits, keys per block, subgroups per workgroup (tests and tuning);
   * default: by the key count and the adapter
   *
   * @internal
   */
  readonly attentionDecode?: AttentionDecode | undefined
  /**
   * flash attention's matrix form for prompts: one pass or two, subgroups per workgroup (tests and tuning);
   * default: one pass where K and V load 8 f16 at a time, subgroups by the workgroups they give
   *
   * @internal
   */
  readonly attentionPrefill?: AttentionPrefill | undefined
  /**
   * how a quantized product past the matrix-vector kernel's columns reads its weights: dequantized into
   * its tiles as they are staged, or copied into f16 first (tests and tuning); default: the copy from
   * 256 columns on GPUs with shader-f16 (on subgroup matrices or register tiles), the tiles on software
   * adapters
   *
   * @internal
   */
  readonly quantizedPrefill?: "tiles" | "copy" | undefined
  /**
   * how the f16 copy of q4_0 / q8_0 weights stages a run of blocks: a word a load, a thread's loads all
   * issued before its stores into workgroup memory (`ahead`), each awaited before the next in the thread's
   * loop (`words`), or 16 bytes a load issued so (`vec4`) (tests and tuning); default: ahead (faster
   * prompts, benchmarks/RESULTS.md, choices)
   *
   * @internal
   */
  readonly copyLoads?: "words" | "vec4" | "ahead" | undefined
  /**
   * the f16 copy of q4_0 / q8_0 weights: vec4s of f16 a thread decodes (4, 8 or 16: its workgroup's run of
   * blocks 128, 256 or 512) and whether it stores them 16 bytes a store (`wide`) or 8 (`half4`) (tests and
   * tuning); default: 4, half4
   *
   * @internal
   */
  readonly copyShape?: { readonly vecs?: 4 | 8 | 16; readonly stores?: "half4" | "wide" } | undefined
  /**
   * short fixed loops written out, as on GPUs, or kept as loops, as on software adapters (tests);
   * default: written out on GPUs
   *
   * @internal
   */
  readonly writeOut?: boolean | undefined
  /**
   * the invocations of a row kernel's workgroup (norms, soft_max; tests and tuning); default: 256 on GPUs,
   * a thread per 4 values up to the adapter's limit for fewer than 64 rows, fewer on software adapters
   *
   * @internal
   */
  readonly rowThreads?: number | undefined
  /**
   * how a product that makes its own norm reduces the row's squares: `subgroups` (the default where the
   * kernel has them) or `tree` over workgroup memory (tests and tuning)
   *
   * @internal
   */
  readonly normReduce?: "tree" | "subgroups" | undefined
  /**
   * a prompt's activations written in f16 where every product reading them runs on subgroup matrices
   * (which round them to f16 anyway): half the bytes for the products to load; default: on (faster prompts,
   * benchmarks/RESULTS.md, choices); `false` keeps them f32
   *
   * @internal
   */
  readonly halfActivations?: boolean | undefined
  /**
   * a layer's values stored into their cache by the dispatch that rotates and stores its keys
   * (rope_set_rows_kv: a dispatch a layer fewer); default: on; `false` keeps two stores (tests and tuning)
   *
   * @internal
   */
  readonly storeValuesWithKeys?: boolean | undefined
  /**
   * a decoding step's keys and values stored into their caches by the q/k/v stack that computes them (the
   * int8 form's or f16 weights' rows' epilogue: a dispatch a layer fewer, rope mode 0); default: on; `false`
   * keeps the store's own dispatch (tests and tuning)
   *
   * @internal
   */
  readonly storeKeysInProducts?: boolean | undefined
  /**
   * a decoding step's residual sum and its norm made by the q/k/v stack or gated FFN that reads the norm
   * (the int8 form: a dispatch fewer before each), not by a dispatch of their own; default: for rows of up to
   * 4096 values; `true` for any, `false` for none (tests and tuning)
   *
   * @internal
   */
  readonly normsInProducts?: boolean | undefined
  /**
   * a decoding step's attention, where its keys are split, merged by the product that reads it (the layer's
   * output projection: a dispatch a layer fewer), not by a dispatch of its own; default: for outputs of up
   * to 2048 values (heads x head size); `true` for any, `false` for none (tests and tuning)
   *
   * @internal
   */
  readonly mergesInProducts?: boolean | undefined
  /**
   * a prompt's residual sum made by the norm that reads it, the sum stored over the stream before it
   * (add_rms_norm_store: a dispatch fewer for each, and the stream read once); default: on; `false` keeps the
   * add's own dispatch (tests and measuring)
   *
   * @internal
   */
  readonly sumsInNorms?: boolean | undefined
  /**
   * a prompt's gated FFN (its gate and up products over the layer's stacked weights, and their swiglu) as one
   * product that stores silu(gate) * up: a dispatch a layer fewer, and a result of half the rows written once;
   * default: with the register-tiled and scalar tiles (not on subgroup matrices, where it ran slower:
   * benchmarks/RESULTS.md); `false` nowhere (tests and measuring)
   *
   * @internal
   */
  readonly gatedPrompts?: boolean | undefined
  /**
   * a product read only by a contiguous copy of it permuted (attention's chain: V·P into the layout the
   * output projection reads) stores its result so itself (Fusion's mul_mat_permuted): a dispatch a layer
   * fewer; default: on; `false` keeps the copy (tests and measuring)
   *
   * @internal
   */
  readonly permutedResults?: boolean | undefined
  /**
   * a split-K product's partial sums added by the add_rms_norm that reads it (a prompt's output projection
   * and down projection with the residual sum and norm after them), not by a merge dispatch of the product's:
   * a dispatch fewer for each; default: on; `false` keeps the merge (tests and measuring)
   *
   * @internal
   */
  readonly splitsInNorms?: boolean | undefined
  /**
   * a query's rope made by the keys' and values' store of the same rope dispatched right after it (a
   * prompt's q beside its layer's rope_set_rows_kv), on threads of its own: a dispatch a layer fewer;
   * default: on; `false` keeps the rope's own dispatch (tests and measuring)
   *
   * @internal
   */
  readonly queryRopesInStores?: boolean | undefined
  /**
   * the WGSL language features of the GPU the device comes from (`navigator.gpu.wgslLanguageFeatures`);
   * default: navigator.gpu's where there is one, else none
   */
  readonly wgslFeatures?: ReadonlySet<string> | undefined
  /** the adapter's info (subgroup sizes, matrix configurations); default: the device's adapterInfo */
  readonly adapterInfo?: AdapterInfo | undefined
  /** a description of the adapter */
  readonly description?: string | undefined
}

const contexts = new WeakMap<Device.Device, GpuContext.Context>()

/** the WGSL language features of navigator.gpu, where there is one */
const wgslFeatures = (): ReadonlySet<string> =>
  (globalThis as { navigator?: { gpu?: { wgslLanguageFeatures?: ReadonlySet<string> } } }).navigator?.gpu
    ?.wgslLanguageFeatures ?? new Set()

/**
 * The GPUDevice behind a WebGPU device (for interop, and to simulate a device loss in tests).
 *
 * @since 0.1.0
 * @category getters
 */
export const gpuDevice = (device: Device.Device): Option.Option<GPUDevice> =>
  Option.map(Option.fromNullable(contexts.get(device)), (c) => c.device)

/**
 * Native GPU buffers alive on the device (compute buffers, params, staging): a leak check's figure.
 *
 * @since 0.1.0
 * @category getters
 */
export const liveNativeBuffers = (device: Device.Device): number => contexts.get(device)?.live ?? 0

/**
 * Whether f16 mul_mat runs on subgroup matrices (tensor cores) on this device: the adapter offers
 * 16x16x16 f16 -> f32 fragments on subgroups of 32 (Dawn's chromium-experimental-subgroup-matrix).
 *
 * @since 0.1.0
 * @category getters
 */
export const hasSubgroupMatrices = (device: Device.Device): boolean =>
  contexts.get(device)?.target.subgroupMatrix === true

/**
 * Whether quantized matrix-vector products (q4_0, q4_1, q5_0, q8_0, q4_K, q6_K) run on int8 dot products on this device (WGSL's
 * packed_4x8_integer_dot_product), against activations rounded as ggml's CPU rounds them for each type
 * (q8_0 blocks; q8_K for the k-quants).
 *
 * @since 0.1.0
 * @category getters
 */
export const hasInt8Dot = (device: Device.Device): boolean => contexts.get(device)?.target.dot4 === true

/**
 * Whether the adapter runs shaders on the CPU (a fallback adapter such as Mesa's lavapipe): kernels then
 * give each invocation more work, since every invocation costs and a few cores need few workgroups.
 *
 * @since 0.1.0
 * @category getters
 */
export const isSoftware = (device: Device.Device): boolean => contexts.get(device)?.target.software === true

/**
 * the parts of GPUAdapterInfo the kernels choose by (subgroup sizes, matrix configurations, whether it
 * is a fallback adapter)
 *
 * @since 0.1.0
 * @category models
 */
export interface AdapterInfo {
  readonly isFallbackAdapter?: boolean | undefined
  readonly subgroupMinSize?: number | undefined
  readonly subgroupMaxSize?: number | undefined
  readonly subgroupMatrixConfigs?:
    | ReadonlyArray<
      {
        readonly componentType: string
        readonly resultComponentType: string
        readonly M: number
        readonly N: number
        readonly K: number
      }
    >
    | undefined
}

/** 16x16x16 f16 -> f32 subgroup matrices on subgroups of exactly 32: what the tensor-core kernel needs */
const hasMatrices = (gpu: GPUDevice, info: AdapterInfo | undefined): boolean => {
  if (info === undefined) return false
  if (!["shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"].every((f) => gpu.features.has(f))) {
    return false
  }
  if (info.subgroupMinSize !== 32 || info.subgroupMaxSize !== 32) return false
  return [...(info.subgroupMatrixConfigs ?? [])].some((c) =>
    c.componentType === "f16" && c.resultComponentType === "f32" && c.M === 16 && c.N === 16 && c.K === 16
  )
}

/**
 * Builds the device. The GPUDevice stays the caller's: destroy it when done.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (gpu: GPUDevice, options: Options): Device.Device => {
  const name = options.name
  const f16 = gpu.features.has("shader-f16")
  const info = options.adapterInfo ?? (gpu as { adapterInfo?: AdapterInfo }).adapterInfo
  const ctx = GpuContext.make(name, gpu, {
    f16,
    maxWorkgroups: gpu.limits.maxComputeWorkgroupsPerDimension,
    workgroupStorage: gpu.limits.maxComputeWorkgroupStorageSize,
    workgroupInvocations: gpu.limits.maxComputeInvocationsPerWorkgroup,
    subgroups: gpu.features.has("subgroups"),
    ...(gpu.features.has("subgroups") && info?.subgroupMinSize !== undefined &&
        info.subgroupMinSize === info.subgroupMaxSize
      ? { subgroupSize: info.subgroupMinSize }
      : {}),
    subgroupMatrix: options.subgroupMatrices !== false && hasMatrices(gpu, info),
    dot4: (options.wgslFeatures ?? wgslFeatures()).has("packed_4x8_integer_dot_product"),
    software: info?.isFallbackAdapter === true,
    ...(options.matrixTile ? { matrixTile: options.matrixTile } : {}),
    ...(options.matrixOrder ? { matrixOrder: options.matrixOrder } : {}),
    ...(options.fillTiles !== undefined ? { fillTiles: options.fillTiles } : {}),
    ...(options.registerOrder ? { registerOrder: options.registerOrder } : {}),
    ...(options.registerTile ? { registerTile: options.registerTile } : {}),
    ...(options.quantizedDecode ? { quantizedDecode: options.quantizedDecode } : {}),
    ...(options.attentionDecode ? { attentionDecode: options.attentionDecode } : {}),
    ...(options.attentionPrefill ? { attentionPrefill: options.attentionPrefill } : {}),
    ...(options.quantizedPrefill ? { quantizedPrefill: options.quantizedPrefill } : {}),
    ...(options.copyLoads ? { copyLoads: options.copyLoads } : {}),
    ...(options.copyShape ? { copyShape: options.copyShape } : {}),
    ...(options.writeOut !== undefined ? { writeOut: options.writeOut } : {}),
    ...(options.rowThreads !== undefined ? { rowThreads: options.rowThreads } : {}),
    ...(options.normReduce !== undefined ? { normReduce: options.normReduce } : {}),
    ...(options.storeKeysInProducts === false ? { storesInProducts: false } : {}),
    ...(options.normsInProducts !== undefined ? { normsInProducts: options.normsInProducts } : {}),
    ...(options.mergesInProducts !== undefined ? { mergesInProducts: options.mergesInProducts } : {}),
    ...(options.gatedPrompts === false ? { gatedPrompts: false } : {}),
    ...(options.splitsInNorms === false ? { splitsInNorms: false } : {}),
    ...(options.queryRopesInStores === false ? { queryRopesInStores: false } : {})
  })
  const ledger = Ledger.make(options.memory ?? gpu.limits.maxBufferSize, name)
  const alignment = gpu.limits.minStorageBufferOffsetAlignment
  const maxSize = gpu.limits.maxStorageBufferBindingSize
  // the mapped kind wraps host bytes the device reads in place (a model's weights)
  const bufferType = (kind: "private" | "shared" | "mapped", bytes?: Uint8Array) =>
    BufferType.make({
      name: `${name}_${kind === "private" ? "Private" : kind === "shared" ? "Shared" : "Mapped"}`,
      device: name,
      kind,
      alignment,
      maxSize,
      isHost: false,
      queue: options.queue,
      ledger,
      allocSize: (t) => Program.allocSize(ctx, t),
      create: (size) => Memory.allocate(ctx, size, kind, bytes),
      destroy: (p) => Memory.release(ctx, p)
    })
  const privateType = bufferType("private")
  const sharedType = bufferType("shared")
  const mappedType = (bytes: Uint8Array) => bufferType("mapped", bytes)
  const interpreter = Interpreter.make(ctx, options.chunk === undefined ? undefined : { chunk: options.chunk })
  const device = Device.make({
    name,
    description: options.description ?? "WebGPU",
    type: "GPU",
    // prompt attention in one pass on subgroup matrices outran the chain in a model's prompts
    // (benchmarks/RESULTS.md); the row form without them, and the two-pass form, did not
    caps: {
      async: true,
      hostBuffer: false,
      bufferFromHostPtr: true,
      events: true,
      fusedAttention: ctx.target.subgroupMatrix === true && f16 && options.attentionPrefill?.form !== "two-pass"
    },
    ledger,
    bufferType: privateType,
    otherBufferTypes: [sharedType, mappedType(new Uint8Array(0))],
    bufferFromHost: (bytes, bufferOptions) => mappedType(bytes).allocate(bytes.byteLength, bufferOptions),
    interpreter,
    supportsOp: (t: Tensor) => Program.supports(ctx, t),
    offloadMinBatch: options.offloadMinBatch ?? 32,
    // a gated FFN's two products, and products sharing their activations (q, k, v), fuse where the int8
    // form computes them (a prompt's gate and up where a gated form does); a residual sum and its next norm
    // (one row: kept beside it; many: stored over the stream), and rope with the set_rows storing it (and
    // the values' set_rows beside it), fuse everywhere, but a norm the int8 products reading it make (its
    // sum then made by the product before it); q's rope with its attention where the decode form computes it;
    // a product with the permuted copy reading it (attention's V·P) where a form of its kernel keeps no scratch
    optimize: (graph) =>
      Fusion.optimize(graph, {
        mulMatSwiglu: Fused.fusesSwiglu(ctx.target),
        mulMatStack: Fused.stacks(ctx.target),
        addRmsNormKeep: true,
        addRmsNormStore: options.sumsInNorms !== false,
        normsInProducts: Fused.leavesNorms(ctx.target),
        ropeSetRows: true,
        ropeSetRowsKv: options.storeValuesWithKeys !== false,
        ropeAttention: Attention.fusesRope(ctx.target),
        ...(options.halfActivations !== false ? { halfActivations: MatMul.takesHalfActivations(ctx.target) } : {}),
        ...(options.permutedResults !== false ? { mulMatPermuted: PermutedResult.storesPermuted(ctx.target) } : {})
      }),
    // leafs in a buffer of their own: kernels bind them read-only, which the H200 runs faster
    // (benchmarks/RESULTS.md, "leaf buffer")
    leafBuffer: true
  })
  contexts.set(device, ctx)
  return device
}
