import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
const tsx = path.join(here, "../../../node_modules/.bin/tsx")

describe("@effect-gpu/testing's root entry", () => {
  // vitest's helpers live at @effect-gpu/testing/vitest: importing them outside vitest throws
  it("loads under plain tsx, outside vitest, without the vitest helpers", () => {
    const out = execFileSync(tsx, [path.join(here, "fixtures/root-entry.ts")], { encoding: "utf8" }).trim()
    const names = out.split(",")
    for (const name of ["TestGpu", "LeakCheck", "Conformance", "Generators", "GgmlReference", "Compare"]) {
      assert.include(names, name)
    }
    assert.notInclude(names, "ConformanceSuite")
  }, 60_000)
})
