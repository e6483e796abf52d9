/**
 * Writes the oracle's fixtures as GGUF files into a folder (tools/llama-oracle/models), with cases.json
 * for the oracle: `tsx packages/llm/test/oracle/write-models.ts tools/llama-oracle/models`.
 */
import { Fixture } from "@effect-gpu/llm"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { continuation, embeddings, models, prompt, specialStrings, strings, tokenizers } from "./cases.js"

const folder = process.argv[2]
if (folder === undefined) {
  console.error("usage: tsx write-models.ts <folder>")
  process.exit(2)
}
mkdirSync(folder, { recursive: true })
const all = [...models, ...tokenizers, ...embeddings]
for (const m of all) writeFileSync(join(folder, `${m.name}.gguf`), Fixture.make(m.options))
writeFileSync(
  join(folder, "cases.json"),
  JSON.stringify({
    models: models.map((m) => m.name),
    tokenizers: tokenizers.map((t) => t.name),
    embeddings: embeddings.map((e) => e.name),
    prompt,
    continuation,
    strings,
    specialStrings
  })
)
console.log(`wrote ${all.length} models to ${folder}`)
