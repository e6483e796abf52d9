/**
 * Events (ggml's backend events): record one on a backend's queue, make another backend's queue wait for
 * it, or wait for it from the host. An event is a scoped resource of its device.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type { Backend } from "./Backend.js"
import type { BackendError } from "./GpuError.js"
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
  /** records the event at the current end of `backend`'s queue */
  readonly record: (backend: Backend) => Effect.Effect<void>
  /** makes `backend`'s later commands wait for the last record */
  readonly wait: (backend: Backend) => Effect.Effect<void>
  /** waits on the host for the last record (at once if never recorded) */
  readonly synchronize: Effect.Effect<void, BackendError>
}

/** @internal */
export interface State {
  pending: Deferred.Deferred<void, BackendError> | undefined
}

const states = new WeakMap<Event, State>()

/** @internal */
export const state = (event: Event): State => states.get(event)!

let nextId = 0

const build = (device: string): Event => {
  const st: State = { pending: undefined }
  const event: Event = {
    [TypeId]: TypeId,
    id: nextId++,
    device,
    record: (backend) => backend.recordEvent(event),
    wait: (backend) => backend.waitEvent(event),
    synchronize: Effect.suspend(() => st.pending === undefined ? Effect.void : Deferred.await(st.pending))
  }
  states.set(event, st)
  return event
}

/** @internal: an unscoped event, for one copy between two backends */
export const unsafeAnonymous = (device: string): Event => build(device)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (device: string, ledger: Ledger.Ledger): Effect.Effect<Event, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      ledger.addEvent(1)
      return build(device)
    }),
    () => Effect.sync(() => ledger.addEvent(-1))
  )

/**
 * @since 0.1.0
 * @category refinements
 */
export const isEvent = (u: unknown): u is Event => Predicate.hasProperty(u, TypeId)
