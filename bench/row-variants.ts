/**
 * soft_max row layouts on raw Dawn, outside the backend: rows of n f32 (default 4096 rows of 4096), each
 * layout timed as 50 dispatches in one submit after a warm-up of about 2 s, checked against the CPU on 16
 * rows, beside a copy of the same rows (the ceiling: one read and one write per element, no reduction).
 * To choose the backend's row kernels; not project code.
 *
 *   tsx row-variants.ts [n] [rows]
 *   T=32,64,256 tsx row-variants.ts 4096 16   # only `vec4 T` and `scalar T` for these T, twice over
 *
 * Layouts: `scalar T` T threads per row, scalar loads; `vec4 T` T threads per row, vec4 loads; each
 * keeps its share of the row in registers between the two reductions; ` ww`: the input declared read_write
 * (as the backend must where an input and the result share a buffer). `backend`: the backend's own
 * soft_max source (from a trace), with its parameters, on two ranges of one buffer as the backend binds an
 * input and the result that share its activation buffer (both read_write), and with the input read-only.
 */
import { Graph, Ops } from "@effect-gpu/core"
import { WebGpu } from "@effect-gpu/webgpu"
import { Effect } from "effect"
import { dispatcher, openRawDevice, readBack, report, settledMs } from "./raw-dawn.js"

const n = Number(process.argv[2] ?? 4096)
const rows = Number(process.argv[3] ?? 4096)

const main = async () => {
  const { device, name } = await openRawDevice()
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC
  const A = new Float32Array(n * rows).map(() => 4 * Math.random() - 2)
  const a = device.createBuffer({ size: A.byteLength, usage })
  const d = device.createBuffer({ size: A.byteLength, usage })
  device.queue.writeBuffer(a, 0, A)

  /** T threads per row, W floats per load (1 or 4); `copy`: no reductions, d = a */
  const kernel = (T: number, W: 1 | 4, copy = false, writableInput = false) => {
    const ty = W === 4 ? "vec4<f32>" : "f32"
    const per = n / W / T
    const red = (name: string, sub: string, f: (x: string, y: string) => string) =>
      `fn ${name}(lid: u32, sgs: u32, sgl: u32, v: f32) -> f32 {
  let s = ${sub}(v);
  if (sgl == 0u) { red[lid / sgs] = s; }
  workgroupBarrier();
  var r = red[0];
  for (var k = 1u; k < ${T}u / sgs; k++) { r = ${f("r", "red[k]")}; }
  workgroupBarrier();
  return r;
}`
    const hmax = W === 4 ? (v: string) => `max(max(${v}.x, ${v}.y), max(${v}.z, ${v}.w))` : (v: string) => v
    const hsum = W === 4 ? (v: string) => `dot(${v}, vec4<f32>(1.0))` : (v: string) => v
    return `enable subgroups;
@group(0) @binding(0) var<storage, ${writableInput ? "read_write" : "read"}> a: array<${ty}>;
@group(0) @binding(1) var<storage, read_write> d: array<${ty}>;
var<workgroup> red: array<f32, ${T}>;
${red("rmax", "subgroupMax", (x, y) => `max(${x}, ${y})`)}
${red("rsum", "subgroupAdd", (x, y) => `${x} + ${y}`)}
@compute @workgroup_size(${T})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_size) sgs: u32, @builtin(subgroup_invocation_id) sgl: u32) {
  let row = wid.x + wid.y * nwg.x;
  let base = row * ${n / W}u + lid;
  var v: array<${ty}, ${per}>;
  for (var r = 0u; r < ${per}u; r++) { v[r] = a[base + r * ${T}u]; }
${
      copy
        ? `  for (var r = 0u; r < ${per}u; r++) { d[base + r * ${T}u] = v[r] * 1.0001; }`
        : `  var mx = -3.0e38;
  for (var r = 0u; r < ${per}u; r++) { mx = max(mx, ${hmax("v[r]")}); }
  mx = rmax(lid, sgs, sgl, mx);
  var s = 0.0;
  for (var r = 0u; r < ${per}u; r++) { v[r] = exp(v[r] - mx); s += ${hsum("v[r]")}; }
  let inv = 1.0 / rsum(lid, sgs, sgl, s);
  for (var r = 0u; r < ${per}u; r++) { d[base + r * ${T}u] = v[r] * inv; }`
    }
}`
  }

  const run = async (
    name: string,
    code: string,
    copy = false,
    bindings: Array<GPUBufferBinding> = [{ buffer: a }, { buffer: d }]
  ) => {
    const go = await dispatcher(device, name, code, bindings, rows)
    if (go === undefined) return
    await go(1)
    const got = await readBack(device, bindings[1], 16 * n * 4)
    let err = 0
    let norm = 0
    for (let r = 0; r < 16; r++) {
      const row = A.subarray(r * n, (r + 1) * n)
      const mx = row.reduce((p, q) => Math.max(p, q), -Infinity)
      const s = row.reduce((p, q) => p + Math.exp(q - mx), 0)
      for (let i = 0; i < n; i++) {
        const want = copy ? row[i] * 1.0001 : Math.exp(row[i] - mx) / s
        err += (got[r * n + i] - want) ** 2
        norm += want * want
      }
    }
    report(name, await settledMs(go), 8 * n * rows, err / norm)
  }

  // the backend's binding: input and result in one buffer
  const both = device.createBuffer({ size: 2 * A.byteLength, usage })
  device.queue.writeBuffer(both, 0, A)
  console.log(`${name}: ${rows} rows of ${n}`)
  if (process.env.T !== undefined) {
    // threads per row: each layout twice, in turn, to see the spread
    for (let pass = 0; pass < 2; pass++) {
      for (const T of process.env.T.split(",").map(Number)) {
        await run(`scalar ${T}`, kernel(T, 1))
        await run(`vec4 ${T}`, kernel(T, 4))
      }
    }
    return
  }
  await run("copy vec4 256", kernel(256, 4, true), true)
  const source = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const [dev] = yield* WebGpu.make({ devices: 1 })
    const backend = yield* dev.makeBackend()
    const g = Graph.make()
    const x = yield* g.input("x", "f32", [n, 8])
    yield* g.output(Ops.softMax(x))
    const plan = yield* backend.allocate(g.build())
    const trace = yield* backend.captureNext
    yield* backend.compute(plan)
    return (yield* trace).entries[0].source!
  })))
  // the backend's parameters: offsets, extents and strides (elements) of a and d, scale, max_bias, n_head_log2
  const shape = [n, rows, 1, 1, 1, n, n * rows, n * rows]
  const params = new Uint32Array([0, ...shape, 0, ...shape, 0, 0, 1])
  new Float32Array(params.buffer).set([1, 0], 18)
  const uniform = device.createBuffer({ size: 256, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST })
  device.queue.writeBuffer(uniform, 0, params)
  const readOnly = source.replace("var<storage, read_write> B0", "var<storage, read> B0").replace(/fn st_a.*\n/, "")
  const ranges = [{ buffer: both, offset: 0, size: A.byteLength }, {
    buffer: both,
    offset: A.byteLength,
    size: A.byteLength
  }, { buffer: uniform }]
  const unguarded = (src: string) => src.replace(/if \(i < n\) /g, "").replace(/if \(lid \+ r \* 256u < n\) /g, "")
  const rowBase = (src: string) =>
    src.replace("var vals", "let base_a = ix_a(0u, i1, i2, i3);\n  let base_d = ix_d(0u, i1, i2, i3);\n  var vals")
      .replace("ld_a(ix_a(i, i1, i2, i3))", "ld_a(base_a + i)").replace("st_d(ix_d(i, i1, i2, i3)", "st_d(base_d + i")
  const separate = [{ buffer: a }, { buffer: d }, { buffer: uniform }]
  await run("backend ww, 1 buffer", source, false, ranges)
  await run("backend ww", source, false, separate)
  await run("backend rw", readOnly, false, separate)
  // which part of the source makes the read_write binding slow: the bounds guards, the strided index, a
  // loop that loads and reduces at once (`split`: every load first, then scale and max)
  const split = (src: string) =>
    src.replace(
      /if \(i < n\) \{ let v = ld_a\(([^;]*)\) \* P\.scale; vals\[r\] = v; mx = max\(mx, v\); \}\n  \}/,
      "if (i < n) { vals[r] = ld_a($1); }\n  }\n  for (var r = 0u; r < 16u; r++) { if (lid + r * 256u < n) { vals[r] *= P.scale; mx = max(mx, vals[r]); } }"
    )
  if (process.env.SHOW === "1") console.log(split(source))
  await run("backend ww unguarded", unguarded(source), false, separate)
  await run("backend ww both", rowBase(unguarded(source)), false, separate)
  await run("backend rw both", rowBase(unguarded(readOnly)), false, separate)
  await run("backend ww split", split(source), false, separate)
  await run("backend ww split+base", rowBase(split(source)), false, separate)
  await run("backend ww", source, false, separate)
  await run("scalar 256 ww", kernel(256, 1, false, true))
  await run("copy vec4 256 ww", kernel(256, 4, true, true), true)
  await run("copy vec4 256", kernel(256, 4, true), true)
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
