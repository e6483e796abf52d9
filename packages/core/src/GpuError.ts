/**
 * The typed errors of effect-gpu. Each carries the facts a user needs to act on it, and a message
 * computed from them.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/GpuError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

const Shape = Schema.Array(Schema.Number)

const fmt = (ne: ReadonlyArray<number>): string => `[${ne.join(", ")}]`

/**
 * An op was built with shapes or types it cannot take.
 *
 * @since 0.1.0
 * @category errors
 */
export class ShapeError extends Schema.TaggedError<ShapeError>("@effect-gpu/core/ShapeError")("ShapeError", {
  op: Schema.String,
  shapes: Schema.Array(Shape),
  dtypes: Schema.Array(Schema.String),
  reason: Schema.String
}) {
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    const operands = this.shapes.map((ne, i) => `${this.dtypes[i] ?? "?"}${fmt(ne)}`).join(", ")
    return `${this.op}(${operands}): ${this.reason}`
  }
}

/**
 * A device cannot run an op with these types or shapes.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnsupportedOp
  extends Schema.TaggedError<UnsupportedOp>("@effect-gpu/core/UnsupportedOp")("UnsupportedOp", {
    op: Schema.String,
    dtypes: Schema.Array(Schema.String),
    device: Schema.String,
    reason: Schema.optional(Schema.String)
  })
{
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    const reason = this.reason ? `: ${this.reason}` : ""
    return `${this.device} does not support ${this.op} with ${this.dtypes.join(", ")}${reason}`
  }
}

/**
 * An allocation was refused: over the buffer type's maximum, over the memory left, or by the driver.
 *
 * @since 0.1.0
 * @category errors
 */
export class AllocationError
  extends Schema.TaggedError<AllocationError>("@effect-gpu/core/AllocationError")("AllocationError", {
    bufferType: Schema.String,
    requested: Schema.Number,
    available: Schema.Number,
    reason: Schema.String,
    cause: Schema.optional(Schema.Defect)
  })
{
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    return `${this.bufferType}: cannot allocate ${this.requested} bytes (${this.available} available): ${this.reason}`
  }
}

/**
 * A read, write or copy outside a buffer or a tensor, or an index that picks a row a table does not have.
 *
 * @since 0.1.0
 * @category errors
 */
export class OutOfBounds extends Schema.TaggedError<OutOfBounds>("@effect-gpu/core/OutOfBounds")("OutOfBounds", {
  target: Schema.String,
  offset: Schema.Number,
  size: Schema.Number,
  limit: Schema.Number,
  /** what offset, size and limit count; default bytes */
  unit: Schema.optional(Schema.String)
}) {
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    return `${this.target}: ${this.unit ?? "bytes"} [${this.offset}, ${
      this.offset + this.size
    }) are outside [0, ${this.limit})`
  }
}

/**
 * The device is gone (destroyed, reset, or its driver failed); every later operation on it fails too.
 *
 * @since 0.1.0
 * @category errors
 */
export class DeviceLost extends Schema.TaggedError<DeviceLost>("@effect-gpu/core/DeviceLost")("DeviceLost", {
  device: Schema.String,
  reason: Schema.String
}) {
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    return `${this.device} was lost: ${this.reason}`
  }
}

/**
 * A kernel failed to build or run (a WGSL compile or validation message, a bad dispatch).
 *
 * @since 0.1.0
 * @category errors
 */
export class KernelError extends Schema.TaggedError<KernelError>("@effect-gpu/core/KernelError")("KernelError", {
  op: Schema.String,
  device: Schema.String,
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    return `${this.device}: kernel for ${this.op} failed: ${this.detail}`
  }
}

/**
 * No adapter (GPU) could be found or opened.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoAdapter extends Schema.TaggedError<NoAdapter>("@effect-gpu/core/NoAdapter")("NoAdapter", {
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    return `no GPU adapter: ${this.reason}`
  }
}

/**
 * An operation on a resource (a buffer, a plan, a backend, a device) whose scope has closed: its memory is
 * gone, so the operation fails at once instead of reading zeros or failing a later, unrelated call.
 *
 * @since 0.1.0
 * @category errors
 */
export class Released extends Schema.TaggedError<Released>("@effect-gpu/core/Released")("Released", {
  resource: Schema.String,
  operation: Schema.String
}) {
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    return `${this.operation}: ${this.resource} was released when its scope closed`
  }
}

/**
 * A read of a tensor whose memory the plan did not keep: an intermediate result, whose bytes were reused
 * for later results of the graph. Mark it as an output (`graph.output(t)`) to read it.
 *
 * @since 0.1.0
 * @category errors
 */
export class NotAnOutput extends Schema.TaggedError<NotAnOutput>("@effect-gpu/core/NotAnOutput")("NotAnOutput", {
  tensor: Schema.String
}) {
  /** @since 0.1.0 */
  readonly [TypeId]: TypeId = TypeId
  /** @since 0.1.0 */
  override get message(): string {
    return `${this.tensor} is an intermediate result whose memory the plan reuses: mark it with graph.output(...) ` +
      "to read it"
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export type GpuError =
  | ShapeError
  | UnsupportedOp
  | AllocationError
  | OutOfBounds
  | DeviceLost
  | KernelError
  | NoAdapter
  | Released
  | NotAnOutput

/**
 * The errors that running commands on a backend can produce.
 *
 * @since 0.1.0
 * @category models
 */
export type BackendError = DeviceLost | KernelError | UnsupportedOp | OutOfBounds | Released

/**
 * @since 0.1.0
 * @category schemas
 */
export const GpuError = Schema.Union(
  ShapeError,
  UnsupportedOp,
  AllocationError,
  OutOfBounds,
  DeviceLost,
  KernelError,
  NoAdapter,
  Released,
  NotAnOutput
)

/**
 * @since 0.1.0
 * @category refinements
 */
export const isGpuError = (u: unknown): u is GpuError => Predicate.hasProperty(u, TypeId)
