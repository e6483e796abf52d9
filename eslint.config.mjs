import effectEslint from "@effect/eslint-plugin"
import tseslint from "typescript-eslint"

export default [
  { ignores: ["**/build/**", "**/node_modules/**", "**/.gpu/**", "**/*.js", "**/*.mjs"] },
  ...tseslint.configs.recommended,
  ...effectEslint.configs.dprint,
  {
    plugins: { "@effect": effectEslint },
    rules: {
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }],
      "@typescript-eslint/array-type": ["warn", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/consistent-type-imports": "warn",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/no-empty-object-type": "off"
    }
  },
  {
    files: ["packages/*/src/**/*.ts"],
    rules: {
      "no-console": "error",
      "@effect/no-import-from-barrel-package": ["error", { packageNames: ["effect"] }]
    }
  }
]
