import { Quant } from "@effect-gpu/core"
import { Gguf } from "@effect-gpu/llm"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

const floats = (n: number, seed: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(seed + i * 0.37))

/** a small file: every metadata type, an f32, an f16-sized and a q4_0 tensor, alignment 64 */
const spec: Gguf.Spec = {
  alignment: 64,
  metadata: [
    ["general.architecture", { type: "string", value: "llama" }],
    ["llama.block_count", { type: "u32", value: 2 }],
    ["llama.rope.freq_base", { type: "f32", value: 10000 }],
    ["llama.attention.layer_norm_rms_epsilon", { type: "f32", value: Math.fround(1e-5) }],
    ["t.u8", { type: "u8", value: 200 }],
    ["t.i8", { type: "i8", value: -5 }],
    ["t.u16", { type: "u16", value: 60000 }],
    ["t.i16", { type: "i16", value: -30000 }],
    ["t.i32", { type: "i32", value: -7 }],
    ["t.bool", { type: "bool", value: true }],
    ["t.u64", { type: "u64", value: 2 ** 40 }],
    ["t.u64big", { type: "u64", value: 2n ** 63n }],
    ["t.i64", { type: "i64", value: -(2 ** 40) }],
    ["t.f64", { type: "f64", value: Math.PI }],
    ["tokenizer.ggml.tokens", { type: "array", itemType: "string", value: ["<s>", "</s>", "héllo", "▁a"] }],
    ["tokenizer.ggml.scores", { type: "array", itemType: "f32", value: [0, -1, -2.5, 3] }]
  ],
  tensors: [
    { name: "token_embd.weight", dtype: "f32", ne: [8, 4], data: new Uint8Array(floats(32, 1).buffer) },
    { name: "output_norm.weight", dtype: "f32", ne: [8], data: new Uint8Array(floats(8, 2).buffer) },
    { name: "blk.0.attn_q.weight", dtype: "q4_0", ne: [64, 3], data: Quant.unsafeQuantize("q4_0", floats(192, 3)) }
  ]
}

describe("GGUF", () => {
  it.effect("a written file reads back: metadata with its types, tensors' types, shapes and aligned data", () =>
    Effect.gen(function*() {
      const bytes = Gguf.write(spec)
      const file = yield* Gguf.parse(bytes, { file: "tiny.gguf" })
      assert.strictEqual(file.version, 3)
      assert.strictEqual(file.alignment, 64)
      assert.strictEqual(file.dataOffset % 64, 0)
      for (const [key, value] of spec.metadata) assert.deepStrictEqual(file.metadata.get(key), value, key)
      assert.deepStrictEqual(file.metadata.get("general.alignment"), { type: "u32", value: 64 })
      assert.strictEqual(file.tensors.length, spec.tensors.length)
      file.tensors.forEach((t, i) => {
        const want = spec.tensors[i]
        assert.strictEqual(t.name, want.name)
        assert.strictEqual(t.dtype, want.dtype)
        assert.deepStrictEqual(t.ne.slice(0, want.ne.length), [...want.ne])
        assert.strictEqual(t.nbytes, want.data.byteLength)
        assert.strictEqual(t.offset % 64, 0)
        assert.deepStrictEqual(bytes.subarray(t.offset, t.offset + t.nbytes), want.data)
      })
      const q = yield* Gguf.tensor(file, "blk.0.attn_q.weight")
      assert.strictEqual(q.nbytes, 3 * 2 * 18)
    }))

  it.effect("the header alone is enough where the file's size is given", () =>
    Effect.gen(function*() {
      const bytes = Gguf.write(spec)
      const head = bytes.subarray(0, Gguf.write({ ...spec, tensors: [] }).byteLength + 200)
      const file = yield* Gguf.parse(head, { file: "big.gguf", size: bytes.byteLength })
      assert.strictEqual(file.tensors[2].offset + file.tensors[2].nbytes <= bytes.byteLength, true)
    }))

  const problem = (bytes: Uint8Array) =>
    Effect.flip(Gguf.parse(bytes, { file: "m.gguf" })).pipe(Effect.map((e) => {
      assert.strictEqual(e._tag, "ModelError")
      assert.strictEqual(e.file, "m.gguf")
      return e.problem
    }))

  it.effect("bad files fail with a ModelError that names the file and the problem", () =>
    Effect.gen(function*() {
      const bytes = Gguf.write(spec)
      // truncated in the header, and in a tensor's data
      assert.match(
        yield* problem(bytes.subarray(0, 40)),
        /^truncated: metadata .* needs \d+ bytes at offset \d+, the file has 40$/
      )
      const last = (yield* Gguf.parse(bytes)).tensors[2]
      assert.strictEqual(
        yield* problem(bytes.subarray(0, last.offset + last.nbytes - 1)),
        `truncated: tensor blk.0.attn_q.weight needs bytes ${last.offset}-${last.offset + last.nbytes}, the file has ${
          last.offset + last.nbytes - 1
        }`
      )
      // bad magic, another version
      const notGguf = bytes.slice()
      notGguf.set([0x7f, 0x45, 0x4c, 0x46], 0)
      assert.strictEqual(yield* problem(notGguf), "not a GGUF file: it starts with 7f 45 4c 46, not \"GGUF\"")
      const v2 = bytes.slice()
      new DataView(v2.buffer).setUint32(4, 2, true)
      assert.strictEqual(yield* problem(v2), "GGUF version 2: this reader takes version 3")
      // a type the backends do not compute with
      const q5_1 = Gguf.write({
        metadata: [],
        tensors: [{ name: "w", dtype: "f32", ne: [32], data: new Uint8Array(128) }]
      })
      // the type id: after the header (24 bytes), the name (8 + 1), the dimension count (4) and one dimension (8)
      const typeAt = 24 + 9 + 4 + 8
      const view = new DataView(q5_1.buffer)
      assert.strictEqual(view.getUint32(typeAt, true), 0) // f32
      view.setUint32(typeAt, 7, true)
      assert.strictEqual(yield* problem(q5_1), "tensor w has ggml type 7 (q5_1), which is not supported")
      // a missing tensor
      const file = yield* Gguf.parse(bytes, { file: "m.gguf" })
      const missing = yield* Effect.flip(Gguf.tensor(file, "output.weight", "m.gguf"))
      assert.strictEqual(missing.message, "m.gguf: tensor output.weight is missing")
    }))
})
