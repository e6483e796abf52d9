/**
 * Events (ggml's backend events): a backend records one at the current end of its queue
 * (`Backend.recordEvent`), another backend's queue waits for it (`Backend.waitEvent`), or the host waits
 * for it (`synchronize`). An event is a scoped resource of its device.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type { BackendError } from "./GpuError.js"
import { Released } from "./GpuError.js"
import type * as Ledger from "./Ledger.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@effect-gpu/core/Event")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * @since 0.1.0
 * @category models
 */
export interface Event {
  readonly [TypeId]: TypeId
  readonly id: number
  readonly device: string
  /** waits on the host for the last record (at once if never recorded) */
  readonly synchronize: Effect.Effect<void, BackendError>
}

/**
 * What a record of an event completes: the device's work before the record finished (or failed).
 *
 * @since 0.1.0
 * @category models
 */
export type Signal = Deferred.Deferred<void, BackendError>

class EventImpl implements Event {
  readonly [TypeId]: TypeId = TypeId
  /** the last record's signal; undefined until recorded */
  signal: Signal | undefined = undefined
  /** set when the event's scope closes */
  released = false
  constructor(readonly id: number, readonly device: string) {}
  get synchronize(): Effect.Effect<void, BackendError> {
    return Effect.suspend(() =>
      this.released
        ? Effect.fail(new Released({ resource: `event ${this.id} of ${this.device}`, operation: "synchronize" }))
        : this.signal === undefined
        ? Effect.void
        : Deferred.await(this.signal)
    )
  }
}

/**
 * Fails with Released when `event`'s scope has closed.
 *
 * @since 0.1.0
 * @category validation
 */
export const checkAlive = (event: Event, operation: string): Effect.Effect<void, Released> =>
  Effect.suspend(() =>
    (event as EventImpl).released
      ? Effect.fail(new Released({ resource: `event ${event.id} of ${event.device}`, operation }))
      : Effect.void
  )

let nextId = 0

/**
 * Starts a new record of the event: the returned signal is what waiters wait for from now on; the
 * backend that records completes it when its queue reaches the record.
 *
 * @since 0.1.0
 * @category recording
 */
export const record = (event: Event): Effect.Effect<Signal> =>
  Effect.tap(Deferred.make<void, BackendError>(), (signal) =>
    Effect.sync(() => {
      ;(event as EventImpl).signal = signal
    }))

/**
 * The signal of the event's last record, if it was recorded.
 *
 * @since 0.1.0
 * @category recording
 */
export const lastRecord = (event: Event): Signal | undefined => (event as EventImpl).signal

/**
 * An event outside any scope or ledger: for one ordering between two backends (a copy), dropped after.
 *
 * @since 0.1.0
 * @category constructors
 */
export const unsafeMake = (device: string): Event => new EventImpl(nextId++, device)

/**
 * A scoped event of a device, counted in its ledger.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (device: string, ledger: Ledger.Ledger): Effect.Effect<Event, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      ledger.addEvent(1)
      return unsafeMake(device)
    }),
    (event) =>
      Effect.sync(() => {
        ;(event as EventImpl).released = true
        ledger.addEvent(-1)
      })
  )

/**
 * @since 0.1.0
 * @category refinements
 */
export const isEvent = (u: unknown): u is Event => Predicate.hasProperty(u, TypeId)
