/**
 * A leak check: runs an effect in its own scope, then asserts that every device of the registry holds
 * no more buffers, bytes, events or backends than before. Works inside `it.scoped` and `it.effect`.
 *
 * @since 0.1.0
 */
import type { Device } from "@effect-gpu/core/Device"
import type * as Ledger from "@effect-gpu/core/Ledger"
import * as Registry from "@effect-gpu/core/Registry"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/**
 * What was left behind, per device.
 *
 * @since 0.1.0
 * @category errors
 */
export class Leak extends Data.TaggedError("Leak")<{
  readonly leaks: ReadonlyArray<
    { readonly device: string; readonly before: Ledger.Snapshot; readonly after: Ledger.Snapshot }
  >
}> {
  /** @since 0.1.0 */
  override get message(): string {
    return this.leaks.map((l) =>
      `${l.device}: buffers ${l.before.buffers} -> ${l.after.buffers}, bytes ${l.before.bytes} -> ${l.after.bytes}, ` +
      `events ${l.before.events} -> ${l.after.events}, backends ${l.before.backends} -> ${l.after.backends}`
    ).join("; ")
  }
}

const held = (s: Ledger.Snapshot) => [s.buffers, s.bytes, s.events, s.backends]

/**
 * Runs `self` in a scope of its own and fails with `Leak` if anything it allocated is still live after.
 *
 * @example
 * ```ts
 * import { Graph, Ops, Registry } from "@effect-gpu/core"
 * import { LeakCheck, TestGpu } from "@effect-gpu/testing"
 * import { Effect } from "effect"
 *
 * // fails with Leak if the plan, the backend or any buffer outlives the program's scope
 * const program = LeakCheck.check(
 *   Effect.gen(function*() {
 *     const backend = yield* (yield* Registry.bestDevice).makeBackend()
 *     const g = Graph.make()
 *     const a = yield* g.input("a", "f32", [8])
 *     yield* g.output(Ops.scale(a, 2))
 *     const plan = yield* backend.allocate(g)
 *     yield* backend.compute(plan)
 *   })
 * )
 *
 * Effect.runPromise(program.pipe(Effect.provide(TestGpu.layer())))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const check = <A, E, R>(
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, E | Leak, Exclude<R, Scope.Scope> | Registry.Registry> =>
  Effect.gen(function*() {
    const devices: ReadonlyArray<Device> = yield* Registry.devices
    const before = devices.map((d) => d.ledger.snapshot())
    const result = yield* Effect.scoped(self)
    const leaks = devices.flatMap((d, i) => {
      const after = d.ledger.snapshot()
      return held(after).some((v, k) => v > held(before[i])[k]) ? [{ device: d.name, before: before[i], after }] : []
    })
    if (leaks.length > 0) return yield* new Leak({ leaks })
    return result
  })
