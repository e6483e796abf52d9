/**
 * The forms of a run of bench/device/forms.sh side by side: for each model and form (its index in the
 * command), prefill and decode tok/s round by round (each round already the best of its runs after a
 * warm-up), and the options in which the form differs from form 0 (llm.mjs's fields), so that a form's
 * effect reads against the spread between rounds.
 *
 *   tsx forms.ts FILE      FILE: forms.jsonl, or a steps.sh step's output (its forms.jsonl after "== ")
 */
import * as fs from "node:fs"

type Line = Readonly<Record<string, unknown>> & {
  readonly form: number
  readonly model: string
  readonly prefill_tok_s: number
  /** null in a prompt-only run (--prefill-only) */
  readonly decode_tok_s: number | null
}

const file = process.argv[2]
if (file === undefined) {
  console.error("usage: tsx forms.ts FORMS.jsonl")
  process.exit(2)
}

/** the result lines (profiles, traces and other files' lines left out) */
const lines: Array<Line> = fs.readFileSync(file, "utf8").split("\n").flatMap((text) => {
  if (!text.startsWith("{\"form\":")) return []
  const line = JSON.parse(text) as Partial<Line>
  return typeof line.form === "number" && typeof line.model === "string" && typeof line.prefill_tok_s === "number"
    ? [line as Line]
    : []
})

/** fields that are measurements or the run's own, not the form's options */
const measured = new Set(["form", "model", "device", "bytes", "load_s", "runs"])
const isOption = (key: string) => !measured.has(key) && !key.endsWith("_tok_s") && !key.endsWith("_fraction")

const models = [...new Set(lines.map((l) => l.model))]
const show = (xs: ReadonlyArray<number | null>) =>
  xs.map((x) => x === null ? "-" : x.toFixed(x >= 1000 ? 0 : 1)).join(" / ")
for (const model of models) {
  const ofModel = lines.filter((l) => l.model === model)
  const base = ofModel.find((l) => l.form === 0)
  console.log(`| ${model} form | prefill (tok/s, by round) | decode (tok/s, by round) | options unlike form 0 |`)
  console.log("| --- | --- | --- | --- |")
  for (const form of [...new Set(ofModel.map((l) => l.form))].sort((a, b) => a - b)) {
    const rounds = ofModel.filter((l) => l.form === form)
    const first = rounds[0]
    const unlike = Object.keys(first)
      .filter((k) => isOption(k) && base !== undefined && JSON.stringify(first[k]) !== JSON.stringify(base[k]))
      .map((k) => `${k}=${JSON.stringify(first[k])}`)
    console.log(
      `| ${form} | ${show(rounds.map((r) => r.prefill_tok_s))} | ${show(rounds.map((r) => r.decode_tok_s))} | ${
        unlike.join(", ") || "-"
      } |`
    )
  }
}
