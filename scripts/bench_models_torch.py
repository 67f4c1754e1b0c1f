#!/usr/bin/env python3
"""PyTorch's side of scripts/bench_models.sh: builds Llama-3-70B on the meta device and runs its
forward on meta token ids, timed; then prints it beside shardplan's Google Benchmark result for
building the same model on meta and tracing one training step (bench_training_trace_bench,
BM_BuildAndTrace_Llama3_70B_HF), with the ratio.

    /usr/bin/python3 scripts/bench_models_torch.py --shardplan-json build/bench/models_shardplan.json \
        [--out build/bench/models.json] [--repetitions 10] [--seq 4096] [--batch 1]

Needs PyTorch (Debian's python3-torch 1.13 at /usr/bin/python3); with --no-torch it prints
shardplan's numbers only.

Note [The PyTorch model]
transformers is not installed here, so the architecture is written out below from Hugging Face's
LlamaForCausalLM (modeling_llama.py) with plain torch.nn modules: Embedding, per layer q/k/v/o
Linear without bias (k and v at the 8 key-value heads: grouped-query attention, repeated to the
64 query heads as HF's repeat_kv does), rotary embedding on q and k (rotate_half), attention as
softmax(q k^T / sqrt(d)) v with a causal mask (torch 1.13 has no scaled_dot_product_attention),
SwiGLU MLP (gate, up, down), RMSNorm (computed in float32 as HF does), final norm and an untied
lm_head; bfloat16 parameters from configs/models/llama3-70b.json. Every module is created with
device='meta' (torch 1.13 has no `with torch.device(...)`). The parameter count is checked against
the published 70,553,706,496 before timing, and the logits' shape after.

What is timed, per repetition: building the model (module constructors, meta parameters) and one
forward of token ids [batch, seq] to the loss (cross entropy against meta targets), with autograd
recording the graph as in training (parameters require grad). shardplan's timed run does more: it
builds the model, traces the forward with FLOPs, bytes and saved tensors per op, derives the
backward and the optimizer step, and sums activation memory. Both sides run on the core
bench_models.sh pins them to. The median over repetitions is reported, like
--benchmark_repetitions.
"""

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time

LLAMA3_70B_PARAMS = 70_553_706_496  # Meta's model card; the HF checkpoint's element count


def load_config(path):
    with open(path) as f:
        return json.load(f)


def build_classes(torch):
    nn = torch.nn
    F = torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self, hidden, eps, **kw):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden, **kw))
            self.eps = eps

        def forward(self, x):
            dtype = x.dtype
            x = x.to(torch.float32)
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * x.to(dtype)

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    class Attention(nn.Module):
        def __init__(self, c, **kw):
            super().__init__()
            h = c["hidden_size"]
            self.heads = c["num_attention_heads"]
            self.kv_heads = c["num_key_value_heads"]
            self.head_dim = h // self.heads
            self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=False, **kw)
            self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False, **kw)
            self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False, **kw)
            self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False, **kw)

        def forward(self, x, cos, sin, mask):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            rep = self.heads // self.kv_heads  # HF's repeat_kv: expand, then merge
            k = k[:, :, None].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(
                b, self.heads, s, self.head_dim)
            v = v[:, :, None].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(
                b, self.heads, s, self.head_dim)
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim) + mask
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, -1)
            return self.o_proj(out)

    class Mlp(nn.Module):
        def __init__(self, c, **kw):
            super().__init__()
            h, f = c["hidden_size"], c["intermediate_size"]
            self.gate_proj = nn.Linear(h, f, bias=False, **kw)
            self.up_proj = nn.Linear(h, f, bias=False, **kw)
            self.down_proj = nn.Linear(f, h, bias=False, **kw)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class DecoderLayer(nn.Module):
        def __init__(self, c, **kw):
            super().__init__()
            self.self_attn = Attention(c, **kw)
            self.mlp = Mlp(c, **kw)
            self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], **kw)
            self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], **kw)

        def forward(self, x, cos, sin, mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Model(nn.Module):
        def __init__(self, c, **kw):
            super().__init__()
            h = c["hidden_size"]
            self.embed_tokens = nn.Embedding(c["vocab_size"], h, **kw)
            self.layers = nn.ModuleList(DecoderLayer(c, **kw) for _ in range(c["num_hidden_layers"]))
            self.norm = RMSNorm(h, c["rms_norm_eps"], **kw)
            d = h // c["num_attention_heads"]
            inv_freq = 1.0 / (c.get("rope_theta", 10000.0) ** (
                torch.arange(0, d, 2, dtype=torch.float32, device=kw["device"]) / d))
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        def forward(self, ids):
            b, s = ids.shape
            x = self.embed_tokens(ids)
            pos = torch.arange(s, device=ids.device, dtype=torch.float32)
            freqs = torch.outer(pos, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)[None]
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
            mask = torch.full((s, s), float("-inf"), device=ids.device, dtype=x.dtype).triu(1)
            for layer in self.layers:
                x = layer(x, cos, sin, mask)
            return self.norm(x)

    class ForCausalLM(nn.Module):
        def __init__(self, c, **kw):
            super().__init__()
            self.model = Model(c, **kw)
            self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False, **kw)

        def forward(self, ids):
            return self.lm_head(self.model(ids))

    return ForCausalLM


def time_torch(config, batch, seq, repetitions):
    import torch

    ForCausalLM = build_classes(torch)
    dtype = getattr(torch, config.get("torch_dtype", "float32"))
    kw = {"device": torch.device("meta"), "dtype": dtype}

    def one():
        model = ForCausalLM(config, **kw)
        ids = torch.empty(batch, seq, dtype=torch.long, device="meta")
        targets = torch.empty(batch * seq, dtype=torch.long, device="meta")
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets)
        return model, logits, loss

    model, logits, loss = one()  # warm-up, and the correctness checks
    params = sum(p.numel() for p in model.parameters())
    assert params == LLAMA3_70B_PARAMS, f"PyTorch model has {params} parameters"
    assert tuple(logits.shape) == (batch, seq, config["vocab_size"]), logits.shape
    assert logits.device.type == "meta" and loss.requires_grad
    del model, logits, loss

    torch.set_num_threads(1)
    wall, cpu = [], []
    gc.disable()
    try:
        for _ in range(repetitions):
            w0, c0 = time.perf_counter_ns(), time.process_time_ns()
            model, logits, loss = one()
            w1, c1 = time.perf_counter_ns(), time.process_time_ns()
            del model, logits, loss
            gc.collect()
            wall.append((w1 - w0) / 1e6)
            cpu.append((c1 - c0) / 1e6)
    finally:
        gc.enable()
    return {"torch_version": torch.__version__, "parameters": params,
            "wall_ms": statistics.median(wall), "cpu_ms": statistics.median(cpu),
            "wall_ms_all": wall, "cpu_ms_all": cpu}


def shardplan_result(path, name):
    with open(path) as f:
        doc = json.load(f)
    rows = {b["name"]: b for b in doc["benchmarks"]}
    med = rows.get(name + "_median") or rows.get(name)
    if med is None:
        sys.exit(f"bench_models_torch.py: {name} not in {path}")
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[med.get("time_unit", "ns")]
    return {"benchmark": name, "wall_ms": med["real_time"] * scale,
            "cpu_ms": med["cpu_time"] * scale, "maxrss_MB": med.get("maxrss_MB"),
            "ops": med.get("ops"), "model_TFLOP": med.get("model_TFLOP"),
            "act_GB": med.get("act_GB"), "context": doc.get("context", {})}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardplan-json", required=True)
    ap.add_argument("--benchmark", default="BM_BuildAndTrace_Llama3_70B_HF/0")
    ap.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "configs",
                                                     "models", "llama3-70b.json"))
    ap.add_argument("--out")
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--load-before", default="")
    ap.add_argument("--load-after", default="")
    a = ap.parse_args()

    sp = shardplan_result(a.shardplan_json, a.benchmark)
    torch_res = None
    if not a.no_torch:
        try:
            torch_res = time_torch(load_config(a.config), a.batch, a.seq, a.repetitions)
        except ImportError:
            print("bench_models_torch.py: torch does not import; shardplan only", file=sys.stderr)

    print(f"Llama-3-70B on meta, batch {a.batch} x seq {a.seq}, median of {a.repetitions}")
    print(f"{'':44} {'wall ms':>9} {'CPU ms':>9}")
    print(f"{'shardplan: build + trace training step':44} {sp['wall_ms']:9.3f} {sp['cpu_ms']:9.3f}"
          f"   (peak RSS {sp['maxrss_MB']:.1f} MB, {sp['ops']:.0f} ops)")
    result = {"shardplan": sp, "batch": a.batch, "seq": a.seq, "repetitions": a.repetitions,
              "load_before": a.load_before, "load_after": a.load_after}
    if torch_res:
        label = f"PyTorch {torch_res['torch_version']}: build + forward"
        print(f"{label:44} {torch_res['wall_ms']:9.3f} {torch_res['cpu_ms']:9.3f}")
        ratio_wall = torch_res["wall_ms"] / sp["wall_ms"]
        ratio_cpu = torch_res["cpu_ms"] / sp["cpu_ms"]
        print(f"{'ratio (PyTorch / shardplan)':44} {ratio_wall:8.1f}x {ratio_cpu:8.1f}x")
        result.update({"torch": torch_res, "ratio_wall": ratio_wall, "ratio_cpu": ratio_cpu})
    print(f"targets: shardplan < 3 ms ({'met' if sp['cpu_ms'] < 3 else 'MISSED'} on CPU time), "
          f"peak RSS < 50 MB ({'met' if sp['maxrss_MB'] < 50 else 'MISSED'})"
          + (f", ratio >= 10x ({'met' if result['ratio_cpu'] >= 10 else 'MISSED'})"
             if torch_res else ""))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
