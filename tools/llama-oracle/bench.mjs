// llama.cpp's Vulkan backend (node-llama-cpp 3.21.1's prebuilt @node-llama-cpp/linux-x64-vulkan) on the
// models bench/llm.ts writes: prefill of 512 tokens and decode of 128 after a 512-token prompt, in tok/s,
// best of 3 after a warm-up, flash attention on, every layer on the GPU. One JSON line per model.
//   node bench.mjs DIR NAME...
import { getLlama } from "node-llama-cpp"
import { join } from "node:path"

const [dir, ...names] = process.argv.slice(2)
if (dir === undefined || names.length === 0) {
  console.error("usage: node bench.mjs DIR NAME...")
  process.exit(2)
}
const PROMPT = 512
const DECODE = 128
const HBM = 4.8e12
const llama = await getLlama({ gpu: "vulkan", build: "never", logLevel: "warn" })

/** the same seeded ids as bench/llm.ts */
const tokens = (n, vocab, seed) => {
  let a = seed
  return Array.from({ length: n }, () => {
    a = (Math.imul(a, 1103515245) + 12345) >>> 0
    return 300 + (a % (vocab - 300))
  })
}

for (const name of names) {
  const modelPath = join(dir, `${name}.gguf`)
  const model = await llama.loadModel({ modelPath, gpuLayers: "max" })
  const context = await model.createContext({ contextSize: PROMPT + DECODE + 64, batchSize: PROMPT, flashAttention: true })
  const sequence = context.getSequence()
  const vocab = name.startsWith("8b") ? 128256 : name === "quick" ? 1000 : 32000
  const prompt = tokens(PROMPT, vocab, 7)
  const prefill = []
  for (let run = 0; run < 4; run++) {
    await sequence.clearHistory()
    const t0 = performance.now()
    await sequence.evaluateWithoutGeneratingNewTokens(prompt)
    prefill.push(PROMPT / ((performance.now() - t0) / 1000))
  }
  const decode = []
  for (let run = 0; run < 4; run++) {
    await sequence.clearHistory()
    let count = 0
    let first = 0
    // past end-of-generation tokens too (random weights pick them): 128 decoding steps after the first token
    for await (const _ of sequence.evaluate([run + 1, ...prompt.slice(1)], { temperature: 0, yieldEogToken: true })) {
      if (count++ === 0) first = performance.now()
      if (count === DECODE + 1) break
    }
    if (count !== DECODE + 1) throw new Error(`${name}: the generation stopped after ${count} tokens`)
    decode.push(DECODE / ((performance.now() - first) / 1000))
  }
  const best = (xs) => Math.max(...xs.slice(1))
  const bytes = model.size
  console.log(JSON.stringify({
    model: name,
    engine: "llama.cpp vulkan (node-llama-cpp 3.21.1)",
    gpu: llama.gpu,
    bytes,
    prefill_tok_s: Number(best(prefill).toFixed(1)),
    decode_tok_s: Number(best(decode).toFixed(1)),
    decode_bandwidth_fraction: Number(((bytes * best(decode)) / HBM).toFixed(3)),
    runs: { prefill: prefill.map((x) => Number(x.toFixed(1))), decode: decode.map((x) => Number(x.toFixed(1))) }
  }))
  await context.dispose()
  await model.dispose()
}
