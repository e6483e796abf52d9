"""
A native anchor for issue 18's attention targets (PyTorch, CUDA events, on the GPU machine): fused attention
against the unfused chain for the bench's shapes, so that the ratio the issue asks of our kernels (fused >= 2x
the chain) can be set against what the same GPU gives natively. Not project code:

    python3 bench/probes/attention-anchor.py

Shapes as bench/models.ts: 32 query heads over 8 KV heads, D 128, an f16 additive mask; prefill
n_q = n_kv = 2048, decode n_q = 1 over 4096 keys. Fused: torch's scaled_dot_product_attention by each of
its backends that takes the case (flash takes no mask: it runs without one, and causal as the mask's best
case); the chain: K.Q in f16, soft_max in f32 with the mask, P in f16 times V (as ggml's GPU backends run it
without flash attention). Each figure is the median GPU time of single calls after a warm-up.
"""
import statistics
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

dev = "cuda"


def timed(f, runs=50):
    for _ in range(5):
        f()
    times = []
    for _ in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000)
        s.record()
        f()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


print(torch.cuda.get_device_name(), torch.__version__)
H, HKV, D = 32, 8, 128
for name, nq, nkv in (("prefill", 2048, 2048), ("decode", 1, 4096)):
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
    us_chain = timed(chain)
    print(f"{name}: chain {us_chain:.1f} us ({flops / us_chain / 1e6:.1f} TFLOP/s)")
    for backend, label, kwargs in (
        (SDPBackend.FLASH_ATTENTION, "flash, no mask", {}),
        (SDPBackend.FLASH_ATTENTION, "flash, causal", {"is_causal": True}),
        (SDPBackend.EFFICIENT_ATTENTION, "efficient, mask", {"attn_mask": mask}),
        (SDPBackend.CUDNN_ATTENTION, "cudnn, mask", {"attn_mask": mask}),
    ):
        if name == "decode" and "causal" in label:
            continue
        try:
            with sdpa_kernel(backend):
                f = lambda: F.scaled_dot_product_attention(q, kr, vr, scale=scale, **kwargs)
                us = timed(f)
                err = (f().float() - chain().float()).abs().max().item() if "mask" in label else float("nan")
            print(
                f"{name}: {label} {us:.1f} us ({flops / us / 1e6:.1f} TFLOP/s), chain / fused {us_chain / us:.2f}x"
                + (f", max |fused - chain| {err:.1e}" if err == err else "")
            )
        except Exception as e:  # a backend that does not take the case
            print(f"{name}: {label} not available ({str(e).splitlines()[0][:100]})")
