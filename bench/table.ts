/**
 * Issue 20's model table from a run of bench/device/table.sh: for each model the best prefill and decode
 * tok/s of each engine over its rounds (each round already the best of its runs after a warm-up), their
 * ratio, decode as a fraction of the bandwidth limit, and each engine's figures round by round (a round
 * far from the other is a slow spell of the machine, not a result).
 *
 *   tsx table.ts OURS.jsonl LLAMA.jsonl      prints Markdown rows, in the order the models first appear
 */
import * as fs from "node:fs"

interface Row {
  readonly model: string
  readonly prefill_tok_s: number
  readonly decode_tok_s: number
  readonly decode_bandwidth_fraction: number
}

const [oursFile, llamaFile] = process.argv.slice(2)
if (oursFile === undefined || llamaFile === undefined) {
  console.error("usage: tsx table.ts OURS.jsonl LLAMA.jsonl")
  process.exit(2)
}

/** an engine's result lines by model (other lines, such as profiles, left out) */
const rounds = (file: string): Map<string, Array<Row>> => {
  const byModel = new Map<string, Array<Row>>()
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    if (!line.startsWith("{")) continue
    const row = JSON.parse(line) as Partial<Row>
    if (row.model === undefined || typeof row.prefill_tok_s !== "number") continue
    byModel.set(row.model, [...(byModel.get(row.model) ?? []), row as Row])
  }
  return byModel
}

const ours = rounds(oursFile)
const llama = rounds(llamaFile)
const best = (rows: ReadonlyArray<Row>, key: "prefill_tok_s" | "decode_tok_s") => Math.max(...rows.map((r) => r[key]))
const each = (rows: ReadonlyArray<Row>, key: "prefill_tok_s" | "decode_tok_s") =>
  rows.map((r) => Math.round(r[key])).join(", ")
const percent = (rows: ReadonlyArray<Row>) =>
  `${Math.round(100 * Math.max(...rows.map((r) => r.decode_bandwidth_fraction)))}%`

console.log(
  "| model | prefill ours / llama.cpp (tok/s) | ratio | decode ours / llama.cpp (tok/s) | ratio | decode bandwidth ours / llama.cpp | rounds: prefill ours; llama.cpp / decode ours; llama.cpp |"
)
console.log("| --- | --- | --- | --- | --- | --- | --- |")
for (const [model, o] of ours) {
  const l = llama.get(model)
  if (l === undefined) {
    console.log(
      `| ${model} | ${Math.round(best(o, "prefill_tok_s"))} / - | - | ${
        Math.round(best(o, "decode_tok_s"))
      } / - | - | ${percent(o)} / - | llama.cpp gave no result |`
    )
    continue
  }
  const ratio = (key: "prefill_tok_s" | "decode_tok_s") => `${(best(o, key) / best(l, key)).toFixed(2)}x`
  console.log(
    `| ${model} | ${Math.round(best(o, "prefill_tok_s"))} / ${Math.round(best(l, "prefill_tok_s"))} | ${
      ratio("prefill_tok_s")
    } | ${Math.round(best(o, "decode_tok_s"))} / ${Math.round(best(l, "decode_tok_s"))} | ${ratio("decode_tok_s")} | ${
      percent(o)
    } / ${percent(l)} | ${each(o, "prefill_tok_s")}; ${each(l, "prefill_tok_s")} / ${each(o, "decode_tok_s")}; ${
      each(l, "decode_tok_s")
    } |`
  )
}
