/**
 * The helpers that need vitest (`@effect/vitest`): the conformance and contract suites as vitest tests.
 * Kept off the package's root entry, which runs anywhere (tsx, node, browsers) without vitest.
 *
 * @since 0.1.0
 */
export * as ConformanceSuite from "./ConformanceSuite.js"
