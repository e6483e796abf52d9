/**
 * Which subgroup-matrix spellings this Dawn accepts, and what a load from a vec4<f16> workgroup array
 * means: offsets and strides in f16 elements or in vec4s. Loads a 16x16 left matrix from a staged
 * 16 x 32 f16 ramp and stores it back. A measuring aid; needs an adapter with subgroup matrices.
 *
 *   tsx sgm-probe.ts
 */
import { openDawn } from "./dawn.js"
import { openMatrixDevice } from "./raw-dawn.js"

const main = async () => {
  const opened = await openMatrixDevice(await openDawn())
  if (opened === undefined) return
  const { device } = opened
  const src = new Uint16Array(512)
  const f16bits = (x: number) => {
    const f = new Float32Array([x])
    const u = new Uint32Array(f.buffer)[0]
    const e = ((u >> 23) & 0xff) - 127 + 15
    return x === 0 ? 0 : (e << 10) | ((u >> 13) & 0x3ff)
  }
  const fromBits = (h: number) => {
    const e = (h >> 10) & 0x1f
    const m = h & 0x3ff
    return e === 0 ? m / 1024 / 16384 : (1 + m / 1024) * 2 ** (e - 15)
  }
  src.forEach((_, i) => (src[i] = f16bits(i)))
  const input = device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST })
  device.queue.writeBuffer(input, 0, src)
  const variants: Record<string, { elem: string; load: string; store: string }> = {
    "old spelling, f16 array": {
      elem: "f16",
      load: "subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&S, 4u, false, 32u)",
      store: "subgroupMatrixStore(&dst, 0u, m, false, 16u)"
    },
    "new spelling, f16 array": {
      elem: "f16",
      load: "subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&S, 4u, 32u)",
      store: "subgroupMatrixStore<row_major>(&dst, 0u, m, 16u)"
    },
    "new spelling, vec4<f16> array": {
      elem: "vec4<f16>",
      load: "subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&S, 4u, 32u)",
      store: "subgroupMatrixStore<row_major>(&dst, 0u, m, 16u)"
    },
    "old spelling, vec4<f16> array": {
      elem: "vec4<f16>",
      load: "subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&S, 4u, false, 32u)",
      store: "subgroupMatrixStore(&dst, 0u, m, false, 16u)"
    }
  }
  for (const [name, v] of Object.entries(variants)) {
    const n = v.elem === "f16" ? 512 : 128
    const code = `enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
@group(0) @binding(0) var<storage, read> src: array<${v.elem}>;
@group(0) @binding(1) var<storage, read_write> dst: array<f16>;
var<workgroup> S: array<${v.elem}, ${n}>;
@compute @workgroup_size(32) fn main(@builtin(local_invocation_index) lid: u32) {
  for (var i = lid; i < ${n}u; i += 32u) { S[i] = src[i]; }
  workgroupBarrier();
  let m = ${v.load};
  ${v.store};
}`
    device.pushErrorScope("validation")
    const module = device.createShaderModule({ code })
    const info = await module.getCompilationInfo()
    const messages = info.messages.map((m) => `${m.type}: ${m.message.split("\n")[0]}`)
    let pipeline: GPUComputePipeline | undefined
    try {
      pipeline = await device.createComputePipelineAsync({ layout: "auto", compute: { module, entryPoint: "main" } })
    } catch (e) {
      messages.push(`pipeline: ${String(e).split("\n")[0]}`)
    }
    await device.popErrorScope()
    if (pipeline === undefined) {
      console.log(`${name}: rejected: ${messages.join(" | ")}`)
      continue
    }
    const out = device.createBuffer({ size: 512, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC })
    const read = device.createBuffer({ size: 512, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })
    const group = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [{ binding: 0, resource: { buffer: input } }, { binding: 1, resource: { buffer: out } }]
    })
    const enc = device.createCommandEncoder()
    const pass = enc.beginComputePass()
    pass.setPipeline(pipeline)
    pass.setBindGroup(0, group)
    pass.dispatchWorkgroups(1)
    pass.end()
    enc.copyBufferToBuffer(out, 0, read, 0, 512)
    device.queue.submit([enc.finish()])
    await read.mapAsync(GPUMapMode.READ)
    const got = Array.from(new Uint16Array(read.getMappedRange().slice(0))).map(fromBits)
    read.unmap()
    // row 0 and row 1 of the loaded matrix: f16 units give 4..19 and 36..51
    console.log(
      `${name}: accepted (${messages.length} messages${messages.length ? `: ${messages[0]}` : ""}); row0 ${
        got.slice(0, 4).join(",")
      }..${got[15]} row1 ${got.slice(16, 20).join(",")}..${got[31]}`
    )
  }
}

main().then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
