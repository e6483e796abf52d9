/**
 * Where a JSON text goes wrong: JSON.parse says what, and in Node 20 often not where. A scan of JSON's
 * grammar finds the first character that cannot continue the text, as a line and column.
 */

export interface Position {
  readonly line: number
  readonly column: number
  readonly found: string
}

/** the first offending character of `text`, or undefined when it is valid JSON */
export const firstError = (text: string): Position | undefined => {
  let i = 0
  const fail = (): never => {
    throw i
  }
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++
  }
  const literal = (word: string) => {
    for (const c of word) {
      if (text[i] !== c) fail()
      i++
    }
  }
  const string = () => {
    i++
    while (i < text.length && text[i] !== "\"") {
      if (text[i] === "\\") i++
      else if (text.charCodeAt(i) < 0x20) fail()
      i++
    }
    if (i >= text.length) fail()
    i++
  }
  const number = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i))
    if (m === null || m[0] === "" || m[0] === "-") fail()
    i += m![0].length
  }
  const value = (): void => {
    ws()
    const c = text[i]
    if (c === "{") {
      i++
      ws()
      if (text[i] === "}") return void i++
      while (true) {
        ws()
        if (text[i] !== "\"") fail()
        string()
        ws()
        if (text[i] !== ":") fail()
        i++
        value()
        ws()
        if (text[i] === ",") i++
        else if (text[i] === "}") return void i++
        else fail()
      }
    }
    if (c === "[") {
      i++
      ws()
      if (text[i] === "]") return void i++
      while (true) {
        value()
        ws()
        if (text[i] === ",") i++
        else if (text[i] === "]") return void i++
        else fail()
      }
    }
    if (c === "\"") return string()
    if (c === "t") return literal("true")
    if (c === "f") return literal("false")
    if (c === "n") return literal("null")
    return number()
  }
  try {
    value()
    ws()
    if (i < text.length) fail()
    return undefined
  } catch (at) {
    if (typeof at !== "number") throw at
    const before = text.slice(0, at).split("\n")
    return {
      line: before.length,
      column: before[before.length - 1].length + 1,
      found: at < text.length ? JSON.stringify(text[at]) : "the end of the body"
    }
  }
}
