/**
 * The registry of devices (ggml's backend registry). Provider layers register their devices into it;
 * programs ask it for a device by name, by type, or for the best one (a GPU before the CPU).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { Device, DeviceType } from "./Device.js"
import { NoAdapter } from "./GpuError.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly devices: Effect.Effect<ReadonlyArray<Device>>
  /** adds a device for the life of the scope */
  readonly register: (device: Device) => Effect.Effect<void, never, Scope.Scope>
  readonly byName: (name: string) => Effect.Effect<Device, NoAdapter>
  readonly byType: (type: DeviceType) => Effect.Effect<ReadonlyArray<Device>>
  /** the first GPU, else an integrated GPU, an accelerator, the CPU */
  readonly best: Effect.Effect<Device, NoAdapter>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Registry extends Context.Tag("@effect-gpu/core/Registry")<Registry, Service>() {}

const rank: Record<DeviceType, number> = { GPU: 0, IGPU: 1, ACCEL: 2, CPU: 3 }

/**
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Service> = Effect.sync(() => {
  const devices: Array<Device> = []
  const names = () => devices.map((d) => d.name).join(", ") || "none"
  return {
    devices: Effect.sync(() => [...devices]),
    register: (device) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          devices.push(device)
        }),
        () =>
          Effect.sync(() => {
            const i = devices.indexOf(device)
            if (i >= 0) devices.splice(i, 1)
          })
      ),
    byName: (name) =>
      Effect.suspend(() => {
        const d = devices.find((d) => d.name === name)
        return d
          ? Effect.succeed(d)
          : Effect.fail(new NoAdapter({ reason: `no device named ${name} (have: ${names()})` }))
      }),
    byType: (type) => Effect.sync(() => devices.filter((d) => d.type === type)),
    best: Effect.suspend(() => {
      const sorted = [...devices].sort((a, b) => rank[a.type] - rank[b.type])
      return sorted.length > 0
        ? Effect.succeed(sorted[0])
        : Effect.fail(new NoAdapter({ reason: "the registry has no devices" }))
    })
  }
})

/**
 * An empty registry; provider layers add to it.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Registry> = Layer.effect(Registry, make)

/**
 * @since 0.1.0
 * @category accessors
 */
export const devices: Effect.Effect<ReadonlyArray<Device>, never, Registry> = Effect.flatMap(Registry, (r) => r.devices)

/**
 * @example
 * ```ts
 * import { Cpu, Registry } from "@effect-gpu/core"
 * import { Effect } from "effect"
 *
 * // the best registered device: a GPU where a provider registered one, else the CPU
 * const program = Effect.gen(function*() {
 *   const device = yield* Registry.bestDevice
 *   const props = yield* device.props
 *   return `${props.name} (${props.type})`
 * })
 *
 * Effect.runPromise(program.pipe(Effect.provide(Cpu.layer()))).then(console.log) // "CPU (CPU)"
 * ```
 *
 * @since 0.1.0
 * @category accessors
 */
export const bestDevice: Effect.Effect<Device, NoAdapter, Registry> = Effect.flatMap(Registry, (r) => r.best).pipe(
  Effect.withSpan("Registry.bestDevice", { captureStackTrace: false })
)

/**
 * @since 0.1.0
 * @category accessors
 */
export const deviceByName = (name: string): Effect.Effect<Device, NoAdapter, Registry> =>
  Effect.flatMap(Registry, (r) => r.byName(name))
