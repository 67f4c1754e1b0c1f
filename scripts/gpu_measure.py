#!/usr/bin/env python3
"""Measure one NVIDIA GPU the way the planner's compute model describes it (docs/cost-model.md §8.1).

Writes JSON: HBM bandwidth (copy, read, triad), bf16 GEMM rates for square and transformer shapes
(forward, data-gradient and weight-gradient products, as nn.Linear runs them), fp8 GEMM rates, fused
causal attention forward and backward, and whole Llama decoder layers (forward, forward+backward) at
tensor-parallel shard shapes. tests/data/gpu_measured_h100.json is this script's output on an H100
SXM; planner tests replay it against the model.

  python3 scripts/gpu_measure.py > measured.json      # needs PyTorch with CUDA, a few minutes
"""
import json
import sys

import torch
import torch.nn.functional as F


def seconds(fn, iters=10, reps=5):
    """Median over `reps` of the mean time of `iters` back-to-back calls, after warm-up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / iters)
    times.sort()
    return times[len(times) // 2]


def hbm():
    n = 1 << 30  # 2 GiB of bf16 per tensor
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    b = torch.empty_like(a)
    c = torch.empty_like(a)
    nbytes = n * 2
    out = {}
    out["copy_bytes_per_s"] = 2 * nbytes / seconds(lambda: b.copy_(a))
    out["read_bytes_per_s"] = nbytes / seconds(lambda: a.sum(dtype=torch.float32))
    out["triad_bytes_per_s"] = 3 * nbytes / seconds(lambda: torch.add(a, b, alpha=2, out=c))
    return out


# Per-rank GEMMs of a Llama decoder layer under Megatron tensor parallelism of degree tp:
# (name, N, K) of the forward y[T, N] = x[T, K] W^T.
def llama_gemms(h, heads, kv_heads, ffn, tp):
    d = h // heads
    return [("qkv", (heads + 2 * kv_heads) * d // tp, h), ("proj", h, heads * d // tp),
            ("gate_up", 2 * ffn // tp, h), ("down", h, ffn // tp)]


LLAMAS = {  # hidden, heads, kv heads, ffn (the models' config.json)
    "llama3-8b": (4096, 32, 8, 14336),
    "llama3-70b": (8192, 64, 8, 28672),
    "llama3.1-405b": (16384, 128, 8, 53248),
}
LAYER_CASES = [("llama3-8b", 1, 8192), ("llama3-70b", 8, 8192), ("llama3.1-405b", 8, 8192),
               ("llama3-70b", 4, 4096)]
GEMM_TOKENS = [2048, 8192]


def clocks():
    """SM clock (MHz) and board power (W) now: a sustained load runs at the power cap."""
    try:
        return {"sm_clock_mhz": torch.cuda.clock_rate(), "power_w": torch.cuda.power_draw() / 1e3}
    except Exception:  # no NVML: the rates stand without them
        return {}


def gemm_rate(m, n, k, dtype=torch.bfloat16):
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype)
    return 2.0 * m * n * k / seconds(lambda: F.linear(x, w))


def gemm_row(name, m, n, k):
    return {"name": name, "m": m, "n": n, "k": k, "flops_per_s": gemm_rate(m, n, k), **clocks()}


def gemms():
    rows = []
    for s in (1024, 2048, 4096, 8192, 16384):
        rows.append(gemm_row("square", s, s, s))
    seen = set()
    for model, tp, _ in LAYER_CASES:
        for name, n, k in llama_gemms(*LLAMAS[model], tp):
            for t in GEMM_TOKENS:
                # forward [T,K]x[K,N], data gradient [T,N]x[N,K], weight gradient [N,T]x[T,K]
                for kind, (mm, nn, kk) in (("fwd", (t, n, k)), ("dgrad", (t, k, n)),
                                           ("wgrad", (n, k, t))):
                    if (mm, nn, kk) in seen:
                        continue
                    seen.add((mm, nn, kk))
                    rows.append(gemm_row(f"{model}/tp{tp}/{name}/{kind}", mm, nn, kk))
    # The first square again, after minutes of load: what the clocks did in between.
    rows.append(gemm_row("square-again", 8192, 8192, 8192))
    return rows


def fp8_gemms():
    rows = []
    if not hasattr(torch, "_scaled_mm"):
        return rows
    one = torch.tensor(1.0, device="cuda")
    for m, n, k in ((8192, 8192, 8192), (16384, 16384, 16384), (8192, 7168, 8192),
                    (8192, 8192, 3584), (8192, 13312, 16384), (2048, 2304, 16384)):
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major [K, N]
        try:
            t = seconds(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                                 out_dtype=torch.bfloat16))
        except RuntimeError as e:  # an older or newer signature: say so, measure the rest
            return [{"error": str(e).splitlines()[0]}]
        rows.append({"m": m, "n": n, "k": k, "flops_per_s": 2.0 * m * n * k / t})
    return rows


def attention_kernels():
    """Names of the GPU kernels one causal attention forward and backward runs: which backend
    PyTorch picked (FlashAttention-2, cuDNN, memory-efficient) moves the rates below by 2x."""
    q = torch.randn(1, 8, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages()}
    return sorted(n[:120] for n in names if any(w in n.lower() for w in ("flash", "fmha", "attn",
                                                                      "attention", "sdpa")))


def attention():
    rows = []
    for b, heads, kv, s, d in ((1, 8, 1, 8192, 128), (1, 16, 1, 8192, 128), (1, 32, 8, 8192, 128),
                               (4, 16, 16, 2048, 128), (1, 16, 1, 32768, 128)):
        q = torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != heads)

        o = fwd()
        g = torch.randn_like(o)
        tf = seconds(fwd)
        tfb = seconds(lambda: torch.autograd.grad(fwd(), (q, k, v), g))
        rows.append({"batch": b, "heads": heads, "kv_heads": kv, "seq": s, "head_dim": d,
                     "forward_s": tf, "backward_s": tfb - tf,
                     "causal_flops_forward": 2 * 2 * b * heads * s * s * d / 2})
    return rows


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def llama_layer(model, tp, seq, batch=1):
    """One decoder layer's per-rank shard under TP degree tp, no communication: bf16, flash
    attention, RMSNorm, RoPE, SwiGLU, as Hugging Face's LlamaDecoderLayer computes it."""
    h, heads, kv, ffn = LLAMAS[model]
    d = h // heads
    lh, lkv, lf = heads // tp, max(kv // tp, 1), ffn // tp
    dev, dt = "cuda", torch.bfloat16

    def param(*shape):
        return (torch.randn(*shape, device=dev, dtype=dt) * 0.02).requires_grad_()

    w_qkv, w_o = param((lh + 2 * lkv) * d, h), param(h, lh * d)
    w_gu, w_down = param(2 * lf, h), param(h, lf)
    n1, n2 = param(h), param(h)
    pos = torch.arange(seq, device=dev, dtype=torch.float32)
    inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d))
    ang = torch.outer(pos, inv)
    cos = torch.cat((ang, ang), -1).cos().to(dt)
    sin = torch.cat((ang, ang), -1).sin().to(dt)
    x = torch.randn(batch, seq, h, device=dev, dtype=dt, requires_grad=True)

    def fwd():
        y = F.rms_norm(x, (h,), n1, 1e-5)
        q, k, v = F.linear(y, w_qkv).split([lh * d, lkv * d, lkv * d], dim=-1)
        q = rope(q.view(batch, seq, lh, d).transpose(1, 2), cos, sin)
        k = rope(k.view(batch, seq, lkv, d).transpose(1, 2), cos, sin)
        v = v.view(batch, seq, lkv, d).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=lkv != lh)
        r = x + F.linear(a.transpose(1, 2).reshape(batch, seq, lh * d), w_o)
        g, u = F.linear(F.rms_norm(r, (h,), n2, 1e-5), w_gu).chunk(2, dim=-1)
        return r + F.linear(F.silu(g) * u, w_down)

    params = (x, w_qkv, w_o, w_gu, w_down, n1, n2)
    gout = torch.randn(batch, seq, h, device=dev, dtype=dt)
    tf = seconds(fwd)
    tfb = seconds(lambda: torch.autograd.grad(fwd(), params, gout))
    return {"model": model, "tp": tp, "seq": seq, "micro_batch": batch, "forward_s": tf,
            "backward_s": tfb - tf}


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    p = torch.cuda.get_device_properties(0)
    out = {
        "device": p.name,
        "streaming_multiprocessors": p.multi_processor_count,
        "memory_bytes": p.total_memory,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "idle": clocks(),
        "hbm": hbm(),
    }
    torch.cuda.empty_cache()
    out["bf16_gemm"] = gemms()
    out["fp8_gemm"] = fp8_gemms()
    out["attention_kernels"] = attention_kernels()
    out["attention"] = attention()
    out["llama_layers"] = [llama_layer(m, tp, s) for m, tp, s in LAYER_CASES]
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
