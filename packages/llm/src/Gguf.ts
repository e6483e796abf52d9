/**
 * GGUF v3, ggml's model file: a header, typed metadata, tensor infos, then the tensors' bytes, each at an
 * aligned offset. `parse` reads the header, metadata and infos from a file's first bytes and locates each
 * tensor's data (never copying it); `write` makes a file (the project's fixtures).
 *
 * Not npm `@huggingface/gguf` (0.4.6): it reads remote files through fetch and range requests, pulls in
 * `@huggingface/tasks`, has no writer, and fails untyped; a model loader needs typed failures that name
 * the file and the problem, the tensors' offsets to stream from, and fixtures written by the same code.
 *
 * @since 0.1.0
 */
import * as DType from "@effect-gpu/core/DType"
import * as Effect from "effect/Effect"
import { ModelError } from "./ModelError.js"

/**
 * The metadata value types of GGUF, by their ids 0-12.
 *
 * @since 0.1.0
 * @category models
 */
export type ValueType =
  | "u8"
  | "i8"
  | "u16"
  | "i16"
  | "u32"
  | "i32"
  | "f32"
  | "bool"
  | "string"
  | "array"
  | "u64"
  | "i64"
  | "f64"

const VALUE_TYPES: ReadonlyArray<ValueType> = [
  "u8",
  "i8",
  "u16",
  "i16",
  "u32",
  "i32",
  "f32",
  "bool",
  "string",
  "array",
  "u64",
  "i64",
  "f64"
]

/**
 * A metadata value with its GGUF type; arrays carry their items' type. 64-bit integers are numbers where
 * they fit one exactly, else bigints.
 *
 * @since 0.1.0
 * @category models
 */
export type Value =
  | { readonly type: Exclude<ValueType, "array" | "string" | "bool">; readonly value: number | bigint }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "bool"; readonly value: boolean }
  | {
    readonly type: "array"
    readonly itemType: Exclude<ValueType, "array">
    readonly value: ReadonlyArray<number | bigint | string | boolean>
  }

/**
 * A tensor of the file: its type and shape (ggml's ne, innermost first) and where its bytes are.
 *
 * @since 0.1.0
 * @category models
 */
export interface TensorInfo {
  readonly name: string
  readonly dtype: DType.DType
  readonly ne: ReadonlyArray<number>
  /** byte offset of the data in the file */
  readonly offset: number
  readonly nbytes: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface GgufFile {
  readonly version: number
  readonly metadata: ReadonlyMap<string, Value>
  readonly tensors: ReadonlyArray<TensorInfo>
  readonly alignment: number
  /** byte offset of the data section: tensors' offsets in the file count from 0, not from here */
  readonly dataOffset: number
}

/** ggml's type ids, for the types the backends compute with */
const TYPE_IDS: ReadonlyArray<readonly [DType.DType, number]> = [
  ["f32", 0],
  ["f16", 1],
  ["q4_0", 2],
  ["q4_1", 3],
  ["q5_0", 6],
  ["q8_0", 8],
  ["q4_K", 12],
  ["q6_K", 14],
  ["i32", 26]
]
/** ggml's names of the types this reader does not take, to say which one a file has */
const OTHER_TYPES: Readonly<Record<number, string>> = {
  7: "q5_1",
  9: "q8_1",
  10: "q2_K",
  11: "q3_K",
  13: "q5_K",
  15: "q8_K",
  24: "i8",
  25: "i16",
  27: "i64",
  28: "f64",
  30: "bf16"
}

const MAGIC = 0x46554747 // "GGUF", little-endian
const DEFAULT_ALIGNMENT = 32

/** a reader over the file's first bytes, failing with how many bytes it needed */
class Reader {
  offset = 0
  private readonly view: DataView
  constructor(readonly bytes: Uint8Array, readonly file: string) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }
  need(n: number, what: string) {
    if (this.offset + n > this.bytes.byteLength) {
      throw new ModelError({
        file: this.file,
        problem: `truncated: ${what} needs ${n} bytes at offset ${this.offset}, the file has ${this.bytes.byteLength}`
      })
    }
  }
  u32(what: string) {
    this.need(4, what)
    const v = this.view.getUint32(this.offset, true)
    this.offset += 4
    return v
  }
  u64(what: string): number | bigint {
    this.need(8, what)
    const v = this.view.getBigUint64(this.offset, true)
    this.offset += 8
    return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v
  }
  count(what: string): number {
    const v = this.u64(what)
    if (typeof v === "bigint") throw new ModelError({ file: this.file, problem: `${what} is ${v}, past any file` })
    return v
  }
  string(what: string) {
    const n = this.count(`${what}'s length`)
    this.need(n, what)
    const s = new TextDecoder("utf-8", { fatal: false }).decode(this.bytes.subarray(this.offset, this.offset + n))
    this.offset += n
    return s
  }
  scalar(type: Exclude<ValueType, "array">, what: string): number | bigint | string | boolean {
    const size = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, bool: 1, u64: 8, i64: 8, f64: 8 } as const
    if (type === "string") return this.string(what)
    this.need(size[type], what)
    const at = this.offset
    this.offset += size[type]
    const v = this.view
    switch (type) {
      case "u8":
        return v.getUint8(at)
      case "i8":
        return v.getInt8(at)
      case "u16":
        return v.getUint16(at, true)
      case "i16":
        return v.getInt16(at, true)
      case "u32":
        return v.getUint32(at, true)
      case "i32":
        return v.getInt32(at, true)
      case "f32":
        return v.getFloat32(at, true)
      case "bool":
        return v.getUint8(at) !== 0
      case "u64": {
        const x = v.getBigUint64(at, true)
        return x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x
      }
      case "i64": {
        const x = v.getBigInt64(at, true)
        return x <= BigInt(Number.MAX_SAFE_INTEGER) && x >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(x) : x
      }
      case "f64":
        return v.getFloat64(at, true)
    }
  }
  valueType(what: string): ValueType {
    const id = this.u32(what)
    const type = VALUE_TYPES[id]
    if (type === undefined) throw new ModelError({ file: this.file, problem: `${what}: unknown value type ${id}` })
    return type
  }
}

/**
 * Reads a GGUF file's header, metadata and tensor infos from its first bytes; `size` is the whole file's
 * size where `bytes` holds only its start (each tensor must lie inside the file).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (
  bytes: Uint8Array,
  options: { readonly file?: string; readonly size?: number } = {}
): Effect.Effect<GgufFile, ModelError> =>
  Effect.try({
    try: () => unsafeParse(bytes, options.file ?? "<bytes>", options.size ?? bytes.byteLength),
    catch: (e) =>
      e instanceof ModelError
        ? e
        : new ModelError({ file: options.file ?? "<bytes>", problem: `unreadable: ${String(e)}` })
  })

const unsafeParse = (bytes: Uint8Array, file: string, size: number): GgufFile => {
  const r = new Reader(bytes, file)
  const fail = (problem: string) => new ModelError({ file, problem })
  const magic = r.u32("the magic")
  if (magic !== MAGIC) {
    const seen = Array.from(bytes.subarray(0, 4), (b) => b.toString(16).padStart(2, "0")).join(" ")
    throw fail(`not a GGUF file: it starts with ${seen}, not "GGUF"`)
  }
  const version = r.u32("the version")
  if (version !== 3) throw fail(`GGUF version ${version}: this reader takes version 3`)
  const nTensors = r.count("the tensor count")
  const nKv = r.count("the metadata count")
  const metadata = new Map<string, Value>()
  for (let i = 0; i < nKv; i++) {
    const key = r.string(`metadata key ${i}`)
    const type = r.valueType(`metadata ${key}`)
    if (type === "array") {
      const itemType = r.valueType(`metadata ${key}'s items`)
      if (itemType === "array") throw fail(`metadata ${key}: arrays of arrays are not supported`)
      const n = r.count(`metadata ${key}'s length`)
      const value: Array<number | bigint | string | boolean> = []
      for (let j = 0; j < n; j++) value.push(r.scalar(itemType, `metadata ${key}[${j}]`))
      metadata.set(key, { type, itemType, value })
    } else {
      metadata.set(key, { type, value: r.scalar(type, `metadata ${key}`) } as Value)
    }
  }
  const alignmentValue = metadata.get("general.alignment")
  const alignment = alignmentValue === undefined ? DEFAULT_ALIGNMENT : Number(alignmentValue.value)
  if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
    throw fail(`general.alignment is ${String(alignmentValue?.value)}: it must be a power of two`)
  }
  const infos: Array<{ name: string; dtype: DType.DType; ne: Array<number>; rel: number }> = []
  for (let i = 0; i < nTensors; i++) {
    const name = r.string(`tensor ${i}'s name`)
    const dims = r.u32(`tensor ${name}'s dimension count`)
    if (dims < 1 || dims > 4) throw fail(`tensor ${name} has ${dims} dimensions: ggml takes 1 to 4`)
    const ne = [1, 1, 1, 1]
    for (let d = 0; d < dims; d++) ne[d] = r.count(`tensor ${name}'s dimension ${d}`)
    const id = r.u32(`tensor ${name}'s type`)
    const dtype = TYPE_IDS.find(([, t]) => t === id)?.[0]
    if (dtype === undefined) {
      throw fail(
        `tensor ${name} has ggml type ${id}${id in OTHER_TYPES ? ` (${OTHER_TYPES[id]})` : ""}, which is not supported`
      )
    }
    if (ne[0] % DType.blockSize(dtype) !== 0) {
      throw fail(`tensor ${name}: ${ne[0]} values per row is not a whole number of ${dtype} blocks`)
    }
    const rel = r.count(`tensor ${name}'s offset`)
    if (rel % alignment !== 0) throw fail(`tensor ${name}'s offset ${rel} is not aligned to ${alignment}`)
    infos.push({ name, dtype, ne, rel })
  }
  const dataOffset = Math.ceil(r.offset / alignment) * alignment
  const tensors = infos.map(({ dtype, name, ne, rel }): TensorInfo => {
    const nbytes = (ne[0] / DType.blockSize(dtype)) * DType.typeSize(dtype) * ne[1] * ne[2] * ne[3]
    const offset = dataOffset + rel
    if (offset + nbytes > size) {
      throw fail(`truncated: tensor ${name} needs bytes ${offset}-${offset + nbytes}, the file has ${size}`)
    }
    return { name, dtype, ne, offset, nbytes }
  })
  return { version, metadata, tensors, alignment, dataOffset }
}

/**
 * A tensor of the file by name, or a ModelError naming it.
 *
 * @since 0.1.0
 * @category getters
 */
export const tensor = (gguf: GgufFile, name: string, file = "<bytes>"): Effect.Effect<TensorInfo, ModelError> => {
  const t = gguf.tensors.find((x) => x.name === name)
  return t === undefined
    ? Effect.fail(new ModelError({ file, problem: `tensor ${name} is missing` }))
    : Effect.succeed(t)
}

/**
 * What `write` takes: metadata in order, and tensors with their bytes (ggml's layout for their type).
 *
 * @since 0.1.0
 * @category models
 */
export interface Spec {
  readonly metadata: ReadonlyArray<readonly [string, Value]>
  readonly tensors: ReadonlyArray<{
    readonly name: string
    readonly dtype: DType.DType
    readonly ne: ReadonlyArray<number>
    readonly data: Uint8Array
  }>
  /** written as general.alignment where it is not 32 */
  readonly alignment?: number
}

/** the growing bytes of a file being written */
class Writer {
  private chunks: Array<Uint8Array> = []
  length = 0
  bytes(b: Uint8Array) {
    this.chunks.push(b)
    this.length += b.byteLength
  }
  private fixed(n: number, put: (v: DataView) => void) {
    const b = new Uint8Array(n)
    put(new DataView(b.buffer))
    this.bytes(b)
  }
  u32(x: number) {
    this.fixed(4, (v) => v.setUint32(0, x, true))
  }
  u64(x: number | bigint) {
    this.fixed(8, (v) => v.setBigUint64(0, BigInt(x), true))
  }
  string(s: string) {
    const b = new TextEncoder().encode(s)
    this.u64(b.byteLength)
    this.bytes(b)
  }
  scalar(type: Exclude<ValueType, "array">, x: number | bigint | string | boolean) {
    switch (type) {
      case "string":
        return this.string(String(x))
      case "bool":
        return this.fixed(1, (v) => v.setUint8(0, x ? 1 : 0))
      case "u8":
        return this.fixed(1, (v) => v.setUint8(0, Number(x)))
      case "i8":
        return this.fixed(1, (v) => v.setInt8(0, Number(x)))
      case "u16":
        return this.fixed(2, (v) => v.setUint16(0, Number(x), true))
      case "i16":
        return this.fixed(2, (v) => v.setInt16(0, Number(x), true))
      case "u32":
        return this.fixed(4, (v) => v.setUint32(0, Number(x), true))
      case "i32":
        return this.fixed(4, (v) => v.setInt32(0, Number(x), true))
      case "f32":
        return this.fixed(4, (v) => v.setFloat32(0, Number(x), true))
      case "u64":
        return this.fixed(8, (v) => v.setBigUint64(0, BigInt(x as number | bigint), true))
      case "i64":
        return this.fixed(8, (v) => v.setBigInt64(0, BigInt(x as number | bigint), true))
      case "f64":
        return this.fixed(8, (v) => v.setFloat64(0, Number(x), true))
    }
  }
  pad(alignment: number) {
    const n = Math.ceil(this.length / alignment) * alignment - this.length
    if (n > 0) this.bytes(new Uint8Array(n))
  }
  result() {
    const out = new Uint8Array(this.length)
    let at = 0
    for (const c of this.chunks) {
      out.set(c, at)
      at += c.byteLength
    }
    return out
  }
}

/**
 * What `header` takes: metadata in order, and each tensor's name, type, shape and size in bytes.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeaderSpec {
  readonly metadata: ReadonlyArray<readonly [string, Value]>
  readonly tensors: ReadonlyArray<{
    readonly name: string
    readonly dtype: DType.DType
    readonly ne: ReadonlyArray<number>
    readonly nbytes: number
  }>
  /** written as general.alignment where it is not 32 */
  readonly alignment?: number
}

/**
 * A GGUF v3 file's bytes up to its data: the header, metadata and tensor infos, padded to the alignment.
 * The tensors' bytes follow in order, each padded to the alignment: a file too large for memory is
 * written a piece at a time.
 *
 * @since 0.1.0
 * @category writing
 */
export const header = (spec: HeaderSpec): Uint8Array => {
  const alignment = spec.alignment ?? DEFAULT_ALIGNMENT
  const metadata: Array<readonly [string, Value]> = [...spec.metadata]
  if (alignment !== DEFAULT_ALIGNMENT) metadata.push(["general.alignment", { type: "u32", value: alignment }])
  const w = new Writer()
  w.u32(MAGIC)
  w.u32(3)
  w.u64(spec.tensors.length)
  w.u64(metadata.length)
  for (const [key, v] of metadata) {
    w.string(key)
    w.u32(VALUE_TYPES.indexOf(v.type))
    if (v.type === "array") {
      w.u32(VALUE_TYPES.indexOf(v.itemType))
      w.u64(v.value.length)
      for (const x of v.value) w.scalar(v.itemType, x)
    } else {
      w.scalar(v.type, v.value)
    }
  }
  let rel = 0
  spec.tensors.forEach((t) => {
    const id = TYPE_IDS.find(([d]) => d === t.dtype)?.[1]
    if (id === undefined) throw new Error(`GGUF has no type for ${t.dtype}`)
    w.string(t.name)
    w.u32(t.ne.length)
    for (const n of t.ne) w.u64(n)
    w.u32(id)
    w.u64(rel)
    rel = Math.ceil((rel + t.nbytes) / alignment) * alignment
  })
  w.pad(alignment)
  return w.result()
}

/**
 * The zero bytes after a tensor of `nbytes` that bring the next to the alignment.
 *
 * @since 0.1.0
 * @category writing
 */
export const padding = (nbytes: number, alignment = DEFAULT_ALIGNMENT): Uint8Array =>
  new Uint8Array(Math.ceil(nbytes / alignment) * alignment - nbytes)

/**
 * Writes a GGUF v3 file (the fixtures: small models with random weights).
 *
 * @since 0.1.0
 * @category writing
 */
export const write = (spec: Spec): Uint8Array => {
  const alignment = spec.alignment ?? DEFAULT_ALIGNMENT
  const head = header({ ...spec, tensors: spec.tensors.map((t) => ({ ...t, nbytes: t.data.byteLength })) })
  const w = new Writer()
  w.bytes(head)
  for (const t of spec.tensors) {
    w.bytes(t.data)
    w.pad(alignment)
  }
  return w.result()
}
