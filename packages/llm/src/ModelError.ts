/**
 * The failure of reading a model: which file, and what is wrong with it.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A model file that cannot be used: truncated, not GGUF, a version or type this reader does not know, a
 * tensor missing or out of its file.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelError extends Schema.TaggedError<ModelError>("@effect-gpu/llm/ModelError")("ModelError", {
  file: Schema.String,
  problem: Schema.String
}) {
  /** @since 0.1.0 */
  override get message(): string {
    return `${this.file}: ${this.problem}`
  }
}
