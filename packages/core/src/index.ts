/**
 * @since 0.1.0
 */
export * as Backend from "./Backend.js"
/**
 * @since 0.1.0
 */
export * as Buffer from "./Buffer.js"
/**
 * @since 0.1.0
 */
export * as BufferType from "./BufferType.js"
/**
 * @since 0.1.0
 */
export * as Command from "./Command.js"
/**
 * @since 0.1.0
 */
export * as Cpu from "./Cpu.js"
/**
 * @since 0.1.0
 */
export * as Device from "./Device.js"
/**
 * @since 0.1.0
 */
export * as DType from "./DType.js"
/**
 * @since 0.1.0
 */
export * as Event from "./Event.js"
/**
 * @since 0.1.0
 */
export * as Float16 from "./Float16.js"
/**
 * @since 0.1.0
 */
export * as GpuError from "./GpuError.js"
/**
 * @since 0.1.0
 */
export * as Graph from "./Graph.js"
/**
 * @since 0.1.0
 */
export * as GraphAllocator from "./GraphAllocator.js"
/**
 * @since 0.1.0
 */
export * as Ledger from "./Ledger.js"

/**
 * The backends' metrics (effect `Metric`), each tagged with its device (`device`): computes finished,
 * their latency, the bytes of device memory allocated and the live buffers.
 *
 * @since 0.1.0
 */
export * as Metrics from "./Metrics.js"

/**
 * A graph over several backends (ggml's backend_sched): placement by support, splits, copies between.
 *
 * @since 0.1.0
 */
export * as Scheduler from "./Scheduler.js"
/**
 * @since 0.1.0
 */
export * as Op from "./Op.js"
/**
 * @since 0.1.0
 */
export * as Ops from "./Ops.js"
/**
 * @since 0.1.0
 */
export * as Plan from "./Plan.js"
/**
 * @since 0.1.0
 */
export * as Quant from "./Quant.js"
/**
 * @since 0.1.0
 */
export * as Registry from "./Registry.js"
/**
 * @since 0.1.0
 */
export * as Tensor from "./Tensor.js"
/**
 * @since 0.1.0
 */
export * as TensorData from "./TensorData.js"
/**
 * @since 0.1.0
 */
export * as Fusion from "./Fusion.js"
/**
 * @since 0.1.0
 */
export * as Trace from "./Trace.js"
