/**
 * Writes the oracle's fixtures as GGUF files into a folder (tools/llama-oracle/models), with cases.json
 * for the oracle: `tsx packages/llm/test/oracle/write-models.ts tools/llama-oracle/models`.
 */
import { Fixture } from "@effect-gpu/llm"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { continuation, models, prompt, specialStrings, strings, tokenizers } from "./cases.js"

const folder = process.argv[2]
if (folder === undefined) {
  console.error("usage: tsx write-models.ts <folder>")
  process.exit(2)
}
mkdirSync(folder, { recursive: true })
for (const m of [...models, ...tokenizers]) writeFileSync(join(folder, `${m.name}.gguf`), Fixture.make(m.options))
writeFileSync(
  join(folder, "cases.json"),
  JSON.stringify({
    models: models.map((m) => m.name),
    tokenizers: tokenizers.map((t) => t.name),
    prompt,
    continuation,
    strings,
    specialStrings
  })
)
console.log(`wrote ${models.length + tokenizers.length} models to ${folder}`)
