// llama.cpp's answers for packages/llm's fixtures, through node-llama-cpp 3.21.1's prebuilt CPU binary.
//   npx tsx packages/llm/test/oracle/write-models.ts tools/llama-oracle/models
//   cd tools/llama-oracle && npm ci && node oracle.mjs models ../../packages/llm/test/oracle/llama.cpp.json
// Flash attention on, as the models run here (flash_attn_ext). Per model: the log-probabilities of the 40 likeliest next tokens at every prompt position, and the
// greedy continuation with each step's margin (the log-probability between the likeliest and the next). Per tokenizer: each string's tokens (special tokens as text, and parsed), and the
// text of those tokens again. Per model naming its pooling: the prompt's pooled embedding.
import { getLlama } from "node-llama-cpp"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const [folder, out] = process.argv.slice(2)
if (folder === undefined || out === undefined) {
  console.error("usage: node oracle.mjs <models folder> <output json>")
  process.exit(2)
}
const cases = JSON.parse(readFileSync(join(folder, "cases.json"), "utf8"))
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" })
const TOP = 40

const result = {
  llamaCpp: "node-llama-cpp 3.21.1, CPU",
  prompt: cases.prompt,
  models: {},
  tokenizers: {},
  embeddings: {}
}

for (const name of cases.models) {
  const model = await llama.loadModel({ modelPath: join(folder, `${name}.gguf`) })
  const context = await model.createContext({ contextSize: 256, batchSize: 256, flashAttention: true })
  const sequence = context.getSequence()
  // the full distribution: temperature 1 and no truncation, so that the probabilities are softmax(logits)
  const options = { temperature: 1, topK: 0, topP: 1, minP: 0 }
  const outputs = await sequence.controlledEvaluate(
    cases.prompt.map((t) => [t, { generateNext: { probabilities: true, options } }])
  )
  const positions = outputs.map((o) => {
    const sorted = [...o.next.probabilities.entries()].sort((a, b) => b[1] - a[1]).slice(0, TOP)
    return sorted.map(([token, p]) => [token, Math.round(Math.log(p) * 1e5) / 1e5])
  })
  // greedy: each next token is the likeliest; the margin to the runner-up says whether the choice is clear
  const greedy = []
  const margins = []
  let last = cases.prompt.at(-1)
  await sequence.clearHistory()
  await sequence.controlledEvaluate(cases.prompt.slice(0, -1))
  for (let i = 0; i < cases.continuation; i++) {
    const [o] = await sequence.controlledEvaluate([[last, { generateNext: { probabilities: true, options } }]])
    const [first, second] = [...o.next.probabilities.entries()].sort((a, b) => b[1] - a[1])
    last = first[0]
    greedy.push(last)
    margins.push(Math.round((Math.log(first[1]) - Math.log(second[1])) * 1e5) / 1e5)
  }
  result.models[name] = { positions, greedy, margins }
  console.log(name, "greedy", greedy.join(","))
  await context.dispose()
  await model.dispose()
}

for (const name of cases.tokenizers) {
  const model = await llama.loadModel({ modelPath: join(folder, `${name}.gguf`), vocabOnly: true })
  const plain = cases.strings.map((s) => model.tokenize(s, false))
  const special = cases.specialStrings.map((s) => model.tokenize(s, true))
  const text = plain.map((tokens) => model.detokenize(tokens, false))
  result.tokenizers[name] = { plain, special, text }
  console.log(name, plain.slice(3, 5).map((t) => t.join(",")).join(" | "))
  await model.dispose()
}

// models that name their pooling: the prompt's pooled embedding (the hidden state after the output norm,
// pooled as the model says; not normalized)
for (const name of cases.embeddings) {
  const model = await llama.loadModel({ modelPath: join(folder, `${name}.gguf`) })
  const context = await model.createEmbeddingContext({ contextSize: 256 })
  const { vector } = await context.getEmbeddingFor(cases.prompt)
  result.embeddings[name] = Array.from(vector, (v) => Number(v.toPrecision(7)))
  console.log(name, "embedding", result.embeddings[name].slice(0, 3).join(","))
  await context.dispose()
  await model.dispose()
}

writeFileSync(out, JSON.stringify(result) + "\n")
console.log(`wrote ${out}`)
