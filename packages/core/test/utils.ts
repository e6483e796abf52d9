import * as fs from "node:fs"
import * as path from "node:path"
import { GgmlReference } from "@effect-gpu/core"

const repoRoot = path.resolve(__dirname, "../../..")

/**
 * ggml's reference cases: EFFECT_GPU_GGML_REFERENCE if set, else the shared copy beside the checkout
 * (what CI lays out), else the copy in this repository.
 */
export const referenceDir = (): string => {
  const candidates = [
    process.env.EFFECT_GPU_GGML_REFERENCE,
    path.join(repoRoot, "../shared/reference/ggml"),
    path.join(repoRoot, "reference/ggml")
  ].filter((p): p is string => p !== undefined && p !== "")
  const found = candidates.find((p) => fs.existsSync(path.join(p, "cases.json")))
  if (found === undefined) throw new Error(`no ggml reference cases in ${candidates.join(", ")}`)
  return found
}

export const loadReference = (): GgmlReference.Suite => {
  const dir = referenceDir()
  return GgmlReference.parse(
    fs.readFileSync(path.join(dir, "cases.json"), "utf8"),
    new Uint8Array(fs.readFileSync(path.join(dir, "data.bin")))
  )
}
