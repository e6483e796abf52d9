/**
 * @since 0.1.0
 */
export * as Gguf from "./Gguf.js"
/**
 * @since 0.1.0
 */
export * as ModelError from "./ModelError.js"
/**
 * @since 0.1.0
 */
export * as Fixture from "./Fixture.js"
/**
 * @since 0.1.0
 */
export * as Hyperparameters from "./Hyperparameters.js"
/**
 * @since 0.1.0
 */
export * as Weights from "./Weights.js"
/**
 * @since 0.1.0
 */
export * as Forward from "./Forward.js"
/**
 * @since 0.1.0
 */
export * as KvCache from "./KvCache.js"
/**
 * @since 0.1.0
 */
export * as Context from "./Context.js"
/**
 * @since 0.1.0
 */
export * as Tokenizer from "./Tokenizer.js"
/**
 * @since 0.1.0
 */
export * as ChatTemplate from "./ChatTemplate.js"
/**
 * @since 0.1.0
 */
export * as Sampler from "./Sampler.js"
/**
 * @since 0.1.0
 */
export * as ModelFile from "./ModelFile.js"
/**
 * @since 0.1.0
 */
export * as Llm from "./Llm.js"
/**
 * @since 0.1.0
 */
export * as LlmMetrics from "./LlmMetrics.js"
