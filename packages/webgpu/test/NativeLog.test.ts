import { describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

// Dawn's native messages are captured off stderr while adapters open (nativeLog.ts); what the process
// writes after must still reach wherever stderr goes
const tsx = path.join(__dirname, "../../../node_modules/.bin/tsx")
const script = path.join(__dirname, "fixtures/stderr-capture.ts")

describe("captureStderr", () => {
  it("captures native writes when stderr is a pipe, and stderr works after", () => {
    // a shell's pipe (a Node parent's are sockets, which the capture leaves alone)
    const err = execFileSync("sh", ["-c", `"${tsx}" "${script}" 2>&1 >/dev/null | cat`], { encoding: "utf8" })
    expect(err).toBe("stderr after\n")
    const out = execFileSync("sh", ["-c", `"${tsx}" "${script}" 2>/dev/null | cat`], { encoding: "utf8" })
    expect(out).toBe("stdout after\n")
  })

  it("leaves a stderr redirected to stdout's file alone: both streams' lines land whole (`> log 2>&1`)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "native-log-"))
    const log = path.join(dir, "log")
    try {
      execFileSync("sh", ["-c", `"${tsx}" "${script}" > "${log}" 2>&1`])
      expect(fs.readFileSync(log, "utf8")).toBe("native line\nstderr after\nstdout after\n")
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("captures native writes when stderr is a file of its own (`2> err`)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "native-log-"))
    const err = path.join(dir, "err")
    try {
      const out = execFileSync("sh", ["-c", `"${tsx}" "${script}" 2> "${err}" | cat`], { encoding: "utf8" })
      expect(out).toBe("stdout after\n")
      expect(fs.readFileSync(err, "utf8")).toBe("stderr after\n")
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
