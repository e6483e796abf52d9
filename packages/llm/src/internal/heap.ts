/**
 * A binary heap where `before(a, b)` puts a first: the tokenizers' merge queues, sampling's top k.
 *
 * @internal
 */
export const heap = <A>(before: (a: A, b: A) => boolean) => {
  const items: Array<A> = []
  const down = () => {
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let first = i
      if (l < items.length && before(items[l], items[first])) first = l
      if (r < items.length && before(items[r], items[first])) first = r
      if (first === i) return
      ;[items[i], items[first]] = [items[first], items[i]]
      i = first
    }
  }
  return {
    get size() {
      return items.length
    },
    peek: (): A | undefined => items[0],
    push: (item: A) => {
      items.push(item)
      let i = items.length - 1
      while (i > 0) {
        const parent = (i - 1) >> 1
        if (!before(items[i], items[parent])) break
        ;[items[i], items[parent]] = [items[parent], items[i]]
        i = parent
      }
    },
    pop: (): A => {
      const top = items[0]
      const last = items.pop()!
      if (items.length > 0) {
        items[0] = last
        down()
      }
      return top
    },
    /** puts `item` in place of the first (one walk down instead of a pop and a push) */
    replaceFirst: (item: A) => {
      items[0] = item
      down()
    }
  }
}
