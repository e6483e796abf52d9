/**
 * @since 0.1.0
 */
export * as Conformance from "./Conformance.js"
/**
 * @since 0.1.0
 */
export * as Compare from "./Compare.js"
/**
 * @since 0.1.0
 */
export * as Generators from "./Generators.js"
/**
 * @since 0.1.0
 */
export * as GgmlReference from "./GgmlReference.js"
/**
 * @since 0.1.0
 */
export * as LeakCheck from "./LeakCheck.js"
/**
 * @since 0.1.0
 */
export * as TestGpu from "./TestGpu.js"
