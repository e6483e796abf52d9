"""
Native anchors on the GPU machine (PyTorch, CUDA events): what the same GPU does without Dawn for the
cases whose targets the WebGPU backend misses. Not project code; it runs only on the GPU machine:

    python3 bench/probes/native-anchors.py [basics] [attention]

`basics` (the default with `attention`): matrix-vector products, a chain of them, add and mul, f16 products.
`attention`: fused attention against the unfused chain for the bench's attention shapes (issue 18's targets):
32 query heads over 8 KV heads, D 128, an f16 additive mask; prefill n_q = n_kv = 2048, decode n_q = 1 over
4096 keys; then decode as the bench's models run it (640 keys; D 64 for the 1B shapes, 128 for the 8B). Fused: torch's scaled_dot_product_attention by each of its backends that takes the case (flash
takes no mask: it runs without one, and causal as the mask's best case); the chain: K.Q in f16, soft_max in
f32 with the mask, P in f16 times V (as ggml's GPU backends run it without flash attention).

Each figure is the median of single calls timed with CUDA events (the kernel's GPU time, launch
included), after a warm-up; `l2 flushed` rewrites 256 MB between calls so no operand is left in the
60 MB L2.
"""
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
flush = torch.empty(64 << 20, device=dev)  # 256 MB


def timed(f, runs=100, flush_l2=False):
    """median GPU time of one call of f, in microseconds"""
    for _ in range(10):
        f()
    times = []
    for _ in range(runs):
        if flush_l2:
            flush.fill_(1.0)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # queue a busy wait first, so the host's launch cost is not inside the events
        torch.cuda._sleep(200_000)
        s.record()
        f()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def tbps(nbytes, us):
    return nbytes / (us * 1e-6) / 1e12


def basics():
    tiny = torch.ones(1, device=dev)
    print(f"empty kernel (one-element add): {timed(lambda: tiny.add_(0)):.1f} us")

    # one matrix-vector product, the decode shape of the issue: 4096x4096 f32 . 4096
    K = 4096
    for flush_l2 in (False, True):
        tag = "l2 flushed" if flush_l2 else "l2 warm"
        for M in (1024, 2048, 4096, 8192, 16384):
            A = torch.randn(M, K, device=dev)
            x = torch.randn(K, device=dev)
            us = timed(lambda: torch.mv(A, x), flush_l2=flush_l2)
            rd = timed(lambda: A.sum(), flush_l2=flush_l2)
            print(
                f"gemv {M}x{K} f32 ({tag}): {us:.1f} us = {tbps(A.numel() * 4, us):.2f} TB/s;"
                f" A.sum() {rd:.1f} us = {tbps(A.numel() * 4, rd):.2f} TB/s"
            )

    # 20 dependent products in one stream, as the bench's decode_chain
    As = [torch.randn(K, K, device=dev) / 64 for _ in range(20)]
    x0 = torch.randn(K, device=dev)

    def chain():
        x = x0
        for A in As:
            x = torch.mv(A, x)
        return x

    us = timed(chain, runs=30)
    print(f"decode chain 20 x 4096x4096 f32: {us:.1f} us = {tbps(20 * K * K * 4, us):.2f} TB/s ({us / 20:.1f} us each)")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        chain()
    us = timed(g.replay, runs=30)
    print(f"decode chain as one CUDA graph: {us:.1f} us = {tbps(20 * K * K * 4, us):.2f} TB/s ({us / 20:.1f} us each)")

    # element-wise at the bench's size: 64 Mi f32, two read and one written
    a = torch.randn(64 << 20, device=dev)
    b = torch.randn(64 << 20, device=dev)
    c = torch.empty_like(a)
    for name, f in (("add", lambda: torch.add(a, b, out=c)), ("mul", lambda: torch.mul(a, b, out=c))):
        us = timed(f)
        print(f"{name} 64 Mi f32: {us:.1f} us = {tbps(3 * a.numel() * 4, us):.2f} TB/s")

    # f16 products: cuBLAS (tensor cores, wgmma on Hopper)
    for N in (4096, 8192):
        a16 = torch.randn(N, N, device=dev, dtype=torch.float16)
        b16 = torch.randn(N, N, device=dev, dtype=torch.float16)
        us = timed(lambda: a16 @ b16, runs=30)
        print(f"matmul f16 {N}^3 (cuBLAS): {us:.1f} us = {2 * N**3 / (us * 1e-6) / 1e12:.1f} TFLOP/s")


def attention():
    H, HKV = 32, 8
    # the two shapes, then a decoding step's of the bench's models (1B: D 64, 8B: D 128; 640 keys)
    for name, nq, nkv, D in (
        ("prefill", 2048, 2048, 128),
        ("decode", 1, 4096, 128),
        ("decode 1B step", 1, 640, 64),
        ("decode 8B step", 1, 640, 128),
    ):
        torch.manual_seed(0)
        q = torch.randn(1, H, nq, D, device=dev, dtype=torch.float16)
        k = torch.randn(1, HKV, nkv, D, device=dev, dtype=torch.float16)
        v = torch.randn(1, HKV, nkv, D, device=dev, dtype=torch.float16)
        mask = (torch.randn(nq, nkv, device=dev) * 0.1).to(torch.float16)
        scale = D ** -0.5
        # the KV heads repeated for their query heads, as the chain's batched products broadcast them
        kr = k.repeat_interleave(H // HKV, dim=1)
        vr = v.repeat_interleave(H // HKV, dim=1)

        def chain():
            s = torch.matmul(q, kr.transpose(-1, -2)).float() * scale + mask
            return torch.matmul(torch.softmax(s, dim=-1).half(), vr)

        flops = 4 * nq * nkv * D * H
        us_chain = timed(chain, runs=50)
        print(f"{name}: chain {us_chain:.1f} us ({flops / us_chain / 1e6:.1f} TFLOP/s)")
        for backend, label, kwargs in (
            (SDPBackend.FLASH_ATTENTION, "flash, no mask", {}),
            (SDPBackend.FLASH_ATTENTION, "flash, causal", {"is_causal": True}),
            (SDPBackend.EFFICIENT_ATTENTION, "efficient, mask", {"attn_mask": mask}),
            (SDPBackend.CUDNN_ATTENTION, "cudnn, mask", {"attn_mask": mask}),
        ):
            if nq == 1 and "causal" in label:
                continue
            try:
                with sdpa_kernel(backend):
                    f = lambda: F.scaled_dot_product_attention(q, kr, vr, scale=scale, **kwargs)
                    us = timed(f, runs=50)
                    err = (f().float() - chain().float()).abs().max().item() if "mask" in label else float("nan")
                print(
                    f"{name}: {label} {us:.1f} us ({flops / us / 1e6:.1f} TFLOP/s), chain / fused {us_chain / us:.2f}x"
                    + (f", max |fused - chain| {err:.1e}" if err == err else "")
                )
            except Exception as e:  # a backend that does not take the case
                print(f"{name}: {label} not available ({str(e).splitlines()[0][:100]})")


print(torch.cuda.get_device_name(), torch.__version__, "L2", torch.cuda.get_device_properties(0).L2_cache_size >> 20, "MB")
for part in sys.argv[1:] or ["basics", "attention"]:
    {"basics": basics, "attention": attention}[part]()
