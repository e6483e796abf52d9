import { Cpu } from "@effect-gpu/core"
import { ConformanceSuite } from "@effect-gpu/testing/vitest"

// the CPU is the reference of the op cases, so only the contract (lifecycle, errors, host data) runs here
ConformanceSuite.contract(Cpu.layer(), { device: "CPU" })
