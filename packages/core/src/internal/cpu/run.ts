/**
 * The reference kernels' dispatcher: one node at a time, every op of the union answered (a new op is a
 * compile error here until it has a kernel). Tensors are read and written through their strides, so
 * views, broadcasting and in-place results all work.
 *
 * @internal
 */
import type { Op } from "../../Op.js"
import type { Tensor } from "../../Tensor.js"
import type { Acc } from "./acc.js"
import { each } from "./acc.js"
import { flashAttnExt } from "./attention.js"
import * as Elementwise from "./elementwise.js"
import * as Indexing from "./indexing.js"
import * as MatMul from "./matmul.js"
import { rope } from "./rope.js"
import * as Rows from "./rows.js"

/** @internal: runs one node; `acc` binds a tensor to memory */
export const run = (node: Tensor, acc: (t: Tensor) => Acc): void => {
  const op: Op = node.op
  const dst = acc(node)
  const src = (i: number) => acc(node.src[i])
  /** the optional sources after the first `fixed`, in the order the op's flags list them */
  const optional = (fixed: number, flags: ReadonlyArray<boolean>) => {
    let k = fixed
    return flags.map((present) => (present ? src(k++) : undefined))
  }
  switch (op._tag) {
    case "None":
    case "View":
    case "Reshape":
    case "Permute":
    case "Transpose":
      return
    case "Add":
    case "Sub":
    case "Mul":
    case "Div":
      return Elementwise.binary(dst, src(0), src(1), Elementwise.binaryFn(op._tag))
    case "Scale":
      return Elementwise.map(dst, src(0), (x) => x * op.s)
    case "Sqr":
      return Elementwise.map(dst, src(0), (x) => x * x)
    case "Sqrt":
      return Elementwise.map(dst, src(0), Math.sqrt)
    case "Exp":
      return Elementwise.map(dst, src(0), Math.exp)
    case "Log":
      return Elementwise.map(dst, src(0), Math.log)
    case "Unary":
      return Elementwise.map(dst, src(0), Elementwise.unaryFn(op.kind))
    case "Clamp":
      return Elementwise.map(dst, src(0), (x) => (x < op.min ? op.min : x > op.max ? op.max : x))
    case "Cpy":
    case "Cont":
      return Elementwise.cpy(dst, src(0))
    case "MulMat":
      return MatMul.mulMat(dst, src(0), src(1))
    case "MulMatAdd":
      MatMul.mulMat(dst, src(0), src(1))
      return Elementwise.binary(dst, dst, src(2), (x, y) => x + y)
    case "MulMatSwiglu": {
      // the up product in a contiguous f32 scratch of the result's shape, then silu(gate) * up in place
      const up = MatMul.scratchLike(node)
      MatMul.mulMat(dst, src(0), src(2))
      MatMul.mulMat(up, src(1), src(2))
      const silu = Elementwise.unaryFn("silu")
      return Elementwise.binary(dst, dst, up, (g, u) => silu(g) * u)
    }
    case "MulMatPermuted": {
      // the product in a contiguous f32 scratch, then each element to its permuted place
      const [a, b] = node.src
      const product = MatMul.scratchOf(node.name, [a.ne[1], b.ne[1], b.ne[2], b.ne[3]])
      MatMul.mulMat(product, src(0), src(1))
      const j = [0, 0, 0, 0]
      return each(product, (i0, i1, i2, i3) => {
        ;[i0, i1, i2, i3].forEach((i, k) => (j[op.axes[k]] = i))
        dst.set(j[0], j[1], j[2], j[3], product.get(i0, i1, i2, i3))
      })
    }
    case "AddRmsNormKeep": {
      // the sum into the first ne0 values of each row, its norm (times the weight) into the next ne0
      const n = node.src[0].ne[0]
      const sum = MatMul.scratchLike(node, n)
      Elementwise.binary(sum, src(0), src(1), (x, y) => x + y)
      const normed = MatMul.scratchLike(node, n)
      Rows.rmsNorm(normed, sum, op.eps)
      if (op.withMul) Elementwise.binary(normed, normed, src(2), (x, y) => x * y)
      each(sum, (i0, i1, i2, i3) => {
        dst.set(i0, i1, i2, i3, sum.get(i0, i1, i2, i3))
        dst.set(n + i0, i1, i2, i3, normed.get(i0, i1, i2, i3))
      })
      return
    }
    case "RopeSetRows":
    case "RopeSetRowsKv": {
      // the rotated rows in a scratch, stored as rows of D * heads values, one per token; then the values'
      // rows into their table at the same indices
      const [, input] = node.src
      const rotated = MatMul.scratchLike(input)
      rope(rotated, src(1), src(2), op.hasFreqFactors ? src(3) : undefined, op)
      const rows = MatMul.reshaped(rotated, [input.ne[0] * input.ne[1], input.ne[2], input.ne[3], 1])
      const idx = op.hasFreqFactors ? 4 : 3
      Indexing.setRows(dst, rows, src(idx))
      if (op._tag === "RopeSetRowsKv") Indexing.setRows(src(idx + 1), src(idx + 2), src(idx))
      return
    }
    case "MulMatStack": {
      // each product in a scratch of its own rows, copied into its place in the stack
      let row = 0
      for (let p = 0; p < op.parts; p++) {
        const part = MatMul.scratchLike(node, node.src[p].ne[1])
        MatMul.mulMat(part, src(p), src(op.parts))
        each(part, (i0, i1, i2, i3) => dst.set(row + i0, i1, i2, i3, part.get(i0, i1, i2, i3)))
        row += node.src[p].ne[1]
      }
      return
    }
    case "MulMatId":
      return MatMul.mulMatId(dst, src(0), src(1), src(2))
    case "AddId":
      return MatMul.addId(dst, src(0), src(1), src(2))
    case "SoftMax": {
      const [mask, sinks] = optional(1, [op.hasMask, op.hasSinks])
      return Rows.softMax(dst, src(0), mask, sinks, op.scale, op.maxBias)
    }
    case "FlashAttnExt": {
      const [mask, sinks] = optional(3, [op.hasMask, op.hasSinks])
      return flashAttnExt(dst, src(0), src(1), src(2), mask, sinks, op)
    }
    case "RopeFlashAttnExt": {
      // q's rows rotated in a scratch laid out as rope takes it ([D, H, n_q]: the tokens third), then
      // attention over the scratch seen as flash_attn_ext takes q ([D, n_q, H])
      const [mask, sinks] = optional(3, [op.hasMask, op.hasSinks])
      const at = 3 + (op.hasMask ? 1 : 0) + (op.hasSinks ? 1 : 0)
      const q = MatMul.swapped12(src(0))
      const rotated = MatMul.scratchLike(q.t)
      rope(rotated, q, src(at), op.rope.hasFreqFactors ? src(at + 1) : undefined, op.rope)
      return flashAttnExt(dst, MatMul.swapped12(rotated), src(1), src(2), mask, sinks, op)
    }
    case "RmsNorm":
      return Rows.rmsNorm(dst, src(0), op.eps)
    case "RmsNormMul":
      Rows.rmsNorm(dst, src(0), op.eps)
      return Elementwise.binary(dst, dst, src(1), (x, y) => x * y)
    case "AddRmsNorm":
      Elementwise.binary(dst, src(0), src(1), (x, y) => x + y)
      Rows.rmsNorm(dst, dst, op.eps)
      return op.withMul ? Elementwise.binary(dst, dst, src(2), (x, y) => x * y) : undefined
    case "AddRmsNormStore": {
      // the sum over its first source (the residual stream, read by what follows as a view of it)
      const sum = src(0)
      Elementwise.binary(sum, sum, src(1), (x, y) => x + y)
      Rows.rmsNorm(dst, sum, op.eps)
      return op.withMul ? Elementwise.binary(dst, dst, src(2), (x, y) => x * y) : undefined
    }
    case "Norm":
      return Rows.norm(dst, src(0), op.eps)
    case "L2Norm":
      return Rows.l2Norm(dst, src(0), op.eps)
    case "GroupNorm":
      return Rows.groupNorm(dst, src(0), op.nGroups, op.eps)
    case "Rope":
      return rope(dst, src(0), src(1), op.hasFreqFactors ? src(2) : undefined, op)
    case "GetRows":
      return Indexing.getRows(dst, src(0), src(1))
    case "SetRows":
      return Indexing.setRows(dst, src(1), src(2))
    case "SumRows":
    case "Mean":
      return Rows.sumRows(dst, src(0), op._tag === "Mean")
    case "Sum":
      return Rows.sum(dst, src(0))
    case "Cumsum":
      return Rows.cumsum(dst, src(0))
    case "Argmax":
      return Rows.argmax(dst, src(0))
    case "Argsort":
    case "TopK":
      return Rows.sortIndices(dst, src(0), op._tag === "TopK" || op.order === "desc")
    case "Concat":
      return Elementwise.concat(dst, src(0), src(1), op.dim)
    case "Glu":
      return Elementwise.glu(dst, src(0), node.src.length > 1 ? src(1) : undefined, op.kind, op.swapped)
    case "DiagMaskInf":
      return Elementwise.diagMaskInf(dst, src(0), op.nPast)
    case "Pad":
      return Elementwise.pad(dst, src(0))
    case "Repeat":
      return Elementwise.repeat(dst, src(0))
    default:
      return unreachable(op)
  }
}

const unreachable = (op: never): never => {
  throw new Error(`cpu: no kernel for ${(op as Op)._tag}`)
}
