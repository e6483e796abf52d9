/**
 * Plans where each tensor of a graph lives inside one compute buffer, as ggml-alloc does: a liveness
 * walk in graph order, a best-fit free list whose tail can grow, memory of a tensor returned when its
 * last user has run, and element-wise ops written over a source that dies at that op.
 * The plan is pure data; backends allocate one buffer of `size` bytes and bind tensors at `offsets`.
 *
 * @since 0.1.0
 */
import type { Graph } from "./Graph.js"
import * as Op from "./Op.js"
import * as Tensor from "./Tensor.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** offsets are multiples of this */
  readonly alignment: number
  /** bytes to reserve for a tensor (its size plus any per-op scratch) */
  readonly allocSize?: (t: Tensor.Tensor) => number
  /** tensors whose memory lives elsewhere (weights bound to their own buffers) */
  readonly external?: (t: Tensor.Tensor) => boolean
  /** keep graph inputs alive for the whole graph, so one set serves many computes (default true) */
  readonly pinInputs?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Plan {
  /** byte offset of each tensor that owns memory, by tensor id */
  readonly offsets: ReadonlyMap<number, number>
  /** bytes reserved for each tensor, by tensor id */
  readonly sizes: ReadonlyMap<number, number>
  /** node id -> id of the source whose memory it took over */
  readonly inPlace: ReadonlyMap<number, number>
  /**
   * ids of the tensors whose memory is never reused while the graph runs (outputs, inputs, weights), so
   * their bytes can be read after a compute
   */
  readonly kept: ReadonlySet<number>
  /** the buffer size needed: the high-water mark */
  readonly size: number
  /** what a plan without reuse would need */
  readonly naiveSize: number
}

const align = (n: number, a: number) => Math.ceil(n / a) * a

/**
 * The bytes a tensor takes in a buffer laid out with `options`: what `allocSize` asks (at least one
 * byte), rounded up to the alignment.
 *
 * @since 0.1.0
 * @category utils
 */
export const slotSize = (t: Tensor.Tensor, options: Pick<Options, "alignment" | "allocSize">): number =>
  align(Math.max((options.allocSize ?? Tensor.nbytes)(t), 1), options.alignment)

/** A free list over one growable range: best fit among inner blocks, else the tail. */
class FreeList {
  private blocks: Array<{ offset: number; size: number }> = []
  private tail = 0
  high = 0

  alloc(size: number): number {
    let best = -1
    for (let i = 0; i < this.blocks.length; i++) {
      const b = this.blocks[i]
      if (b.size >= size && (best === -1 || b.size < this.blocks[best].size)) best = i
    }
    if (best !== -1) {
      const b = this.blocks[best]
      const offset = b.offset
      if (b.size === size) this.blocks.splice(best, 1)
      else {
        b.offset += size
        b.size -= size
      }
      return offset
    }
    // the last free block may touch the tail: grow from its start
    const last = this.blocks[this.blocks.length - 1]
    let offset = this.tail
    if (last !== undefined && last.offset + last.size === this.tail) {
      offset = last.offset
      this.blocks.pop()
    }
    this.tail = offset + size
    this.high = Math.max(this.high, this.tail)
    return offset
  }

  free(offset: number, size: number): void {
    let i = 0
    while (i < this.blocks.length && this.blocks[i].offset < offset) i++
    this.blocks.splice(i, 0, { offset, size })
    // merge with the next, then with the previous
    if (i + 1 < this.blocks.length && offset + size === this.blocks[i + 1].offset) {
      this.blocks[i].size += this.blocks[i + 1].size
      this.blocks.splice(i + 1, 1)
    }
    if (i > 0 && this.blocks[i - 1].offset + this.blocks[i - 1].size === offset) {
      this.blocks[i - 1].size += this.blocks[i].size
      this.blocks.splice(i, 1)
      i--
    }
    // a block that reaches the tail gives the tail back
    const b = this.blocks[i]
    if (b.offset + b.size === this.tail) {
      this.tail = b.offset
      this.blocks.splice(i, 1)
    }
  }
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const plan = (graph: Graph, options: Options): Plan => {
  const alignment = options.alignment
  const allocSize = options.allocSize ?? Tensor.nbytes
  const external = options.external ?? (() => false)
  const pinInputs = options.pinInputs ?? true
  const offsets = new Map<number, number>()
  const sizes = new Map<number, number>()
  const inPlace = new Map<number, number>()
  const children = new Map<number, number>()
  const views = new Map<number, number>()
  const owner = new Map<number, number>() // tensor id -> id of the allocation it uses (in-place chains)
  const free = new FreeList()
  let naiveSize = 0

  const outputs = new Set(graph.outputs.map((t) => t.id))
  for (const t of graph.outputs) if (t.viewSrc !== undefined) outputs.add(t.viewSrc.id)
  for (const t of graph.nodes) {
    if ((t.flags & Tensor.Flags.output) !== 0) {
      outputs.add(t.id)
      if (t.viewSrc !== undefined) outputs.add(t.viewSrc.id)
    }
  }
  const pinned = (t: Tensor.Tensor) =>
    outputs.has(t.id) || (t.flags & Tensor.Flags.param) !== 0 || (pinInputs && (t.flags & Tensor.Flags.input) !== 0)
  const owns = (t: Tensor.Tensor) => t.viewSrc === undefined && !external(t)

  const allocate = (t: Tensor.Tensor) => {
    if (!owns(t) || offsets.has(t.id)) return
    const size = slotSize(t, { alignment, allocSize })
    naiveSize += size
    sizes.set(t.id, size)
    offsets.set(t.id, free.alloc(size))
    owner.set(t.id, t.id)
  }

  const release = (t: Tensor.Tensor) => {
    if (!owns(t) || pinned(t)) return
    const id = owner.get(t.id)
    if (id === undefined || id !== t.id) return
    free.free(offsets.get(t.id)!, sizes.get(t.id)!)
    owner.delete(t.id)
  }

  for (const n of graph.nodes) {
    for (const s of n.src) children.set(s.id, (children.get(s.id) ?? 0) + 1)
    if (n.viewSrc !== undefined) views.set(n.viewSrc.id, (views.get(n.viewSrc.id) ?? 0) + 1)
  }

  // leafs first, as ggml: inputs and weights get their place before any node
  for (const l of graph.leafs) allocate(l)

  for (const node of graph.nodes) {
    if (owns(node)) {
      let reused = false
      if (Op.canInPlace(node.op)) {
        for (const parent of node.src) {
          if (
            owns(parent) && !pinned(parent) && owner.get(parent.id) === parent.id && Tensor.sameLayout(node, parent) &&
            children.get(parent.id) === 1 && (views.get(parent.id) ?? 0) === 0
          ) {
            // take over the parent's memory; it is not freed when the parent dies
            offsets.set(node.id, offsets.get(parent.id)!)
            sizes.set(node.id, sizes.get(parent.id)!)
            owner.set(node.id, node.id)
            owner.delete(parent.id)
            inPlace.set(node.id, parent.id)
            naiveSize += slotSize(node, { alignment, allocSize })
            reused = true
            break
          }
        }
      }
      if (!reused) allocate(node)
    }
    for (const parent of node.src) {
      const left = (children.get(parent.id) ?? 0) - 1
      children.set(parent.id, left)
      if (left === 0 && (views.get(parent.id) ?? 0) === 0) {
        if (parent.viewSrc !== undefined) {
          const vs = parent.viewSrc
          const vleft = (views.get(vs.id) ?? 0) - 1
          views.set(vs.id, vleft)
          if (vleft === 0 && (children.get(vs.id) ?? 0) === 0) release(vs)
        } else release(parent)
      }
    }
    // a node nobody reads dies at once unless it is pinned
    if ((children.get(node.id) ?? 0) === 0 && (views.get(node.id) ?? 0) === 0) {
      if (node.viewSrc !== undefined) {
        const vleft = (views.get(node.viewSrc.id) ?? 0) - 1
        views.set(node.viewSrc.id, vleft)
        if (vleft === 0 && (children.get(node.viewSrc.id) ?? 0) === 0) release(node.viewSrc)
      } else release(node)
    }
  }
  const kept = new Set<number>()
  for (const t of [...graph.leafs, ...graph.nodes]) if (owns(t) && pinned(t)) kept.add(t.id)
  return { offsets, sizes, inPlace, kept, size: Math.max(free.high, alignment), naiveSize }
}
