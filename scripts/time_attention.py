#!/usr/bin/env python3
"""Time the attention calls of a GPU rehearsal with PyTorch's fused attention on this GPU.

`shardplan rehearse --device cuda --out r.json` times a plan's layer GEMMs with cuBLAS and lists the
attention core as calls of a fused kernel that do one rank's work (compute.attention_calls; Note
[Rehearsed attention] in planner/materialize/layer_attention.h). shardplan ships no attention
kernel; F.scaled_dot_product_attention runs the one the stacks assume (cuDNN's or FlashAttention's,
Note [Attention kernels] in planner/candidate/stack_profile.h). This script times each call,
forward and forward + backward, and writes them back into the file as compute.attention rows
(the form `calibrate` reads: batch, heads, seq, keys, head_dim, value_dim, causal, forward_s,
backward_s), beside the cost model's predicted seconds, with the kernels that ran. Then

  shardplan calibrate --cluster hgx-h200 --rehearsal r.json --out my-h200.json

prints the measured rate over the predicted for the attention, as it does for scripts/gpu_measure.py.

  python3 scripts/time_attention.py r.json [--out timed.json] [--device cpu]

--device cpu runs them on the CPU: only to check the script, the figures say nothing of a GPU.
Bad input: one line on stderr naming the field, exit 2, the file untouched.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def fail(message):
    print(f"time_attention.py: error: {message}", file=sys.stderr)
    sys.exit(2)


FIELDS = ("batch", "heads", "kv_heads", "seq", "keys", "head_dim", "value_dim")


def read_calls(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}, expected a rehearsal file ('shardplan rehearse --out')")
    if not isinstance(doc, dict) or doc.get("format") != "shardplan.rehearsal":
        fail(f"{path}: field 'format': expected 'shardplan.rehearsal'")
    compute = doc.get("compute")
    if not isinstance(compute, dict) or not isinstance(compute.get("attention_calls"), list):
        fail(f"{path}: no compute.attention_calls, expected a rehearsal with --device cuda from "
             "this version of shardplan")
    calls = compute["attention_calls"]
    for i, c in enumerate(calls):
        for k in FIELDS:
            v = c.get(k) if isinstance(c, dict) else None
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 1 << 24:
                fail(f"{path}: compute.attention_calls[{i}].{k}: {v!r}, expected an integer "
                     "in [1, 2^24]")
        if not isinstance(c.get("causal"), bool):
            fail(f"{path}: compute.attention_calls[{i}].causal: expected true or false")
        if c["heads"] % c["kv_heads"] != 0:
            fail(f"{path}: compute.attention_calls[{i}]: {c['heads']} heads over "
                 f"{c['kv_heads']} key/value heads, expected a multiple")
    return doc, calls


def timer(device):
    """seconds(fn): the median of 5 means of 10 calls after 3 warm-ups: on a GPU
    scripts/gpu_measure.py's (CUDA events), on a CPU the same with the host clock."""
    if device == "cuda":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from gpu_measure import seconds
        return seconds

    def seconds(fn, iters=10, reps=5):
        for _ in range(3):
            fn()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            times.append((time.perf_counter() - t0) / iters)
        return statistics.median(times)
    return seconds


def kernels_of(torch, fn):
    """The GPU kernels one forward + backward launches whose names say attention: which backend
    PyTorch chose (cuDNN, FlashAttention-2, memory-efficient) moves the rate by up to 2x."""
    words = ("flash", "fmha", "attn", "attention", "sdpa", "cudnn")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.key[:120] for e in prof.key_averages()
                   if any(w in e.key.lower() for w in words)})


def attention(torch, F, q, k, v, causal):
    """F.scaled_dot_product_attention with grouped key/value heads; on a PyTorch without
    enable_gqa (before 2.5) the heads are repeated, and without the function at all (before 2.0:
    Debian's, for --device cpu) the math path is written out."""
    h, hk = q.shape[1], k.shape[1]
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is not None and hk != h:
        try:
            return sdpa(q, k, v, is_causal=causal, enable_gqa=True)
        except TypeError:
            pass
    if hk != h:
        k, v = k.repeat_interleave(h // hk, dim=1), v.repeat_interleave(h // hk, dim=1)
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=causal)
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:  # as SDPA's is_causal: query i sees keys 0..i
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(-1) @ v


def time_call(torch, c, device, seconds):
    import torch.nn.functional as F
    dt = torch.bfloat16
    b, h, hk, L, S, E, Ev = (c[k] for k in ("batch", "heads", "kv_heads", "seq", "keys",
                                           "head_dim", "value_dim"))
    q = torch.randn(b, h, L, E, device=device, dtype=dt, requires_grad=True)
    k = torch.randn(b, hk, S, E, device=device, dtype=dt, requires_grad=True)
    v = torch.randn(b, hk, S, Ev, device=device, dtype=dt, requires_grad=True)

    def fwd():
        return attention(torch, F, q, k, v, c["causal"])

    g = torch.randn_like(fwd())
    step = lambda: torch.autograd.grad(fwd(), (q, k, v), g)
    forward = seconds(fwd)
    both = seconds(step)
    kernels = kernels_of(torch, step) if device == "cuda" else []
    return forward, max(both - forward, 0.0), kernels


def write_atomically(path, doc):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".time_attention.")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rehearsal", help="a file from 'shardplan rehearse --device cuda --out'")
    ap.add_argument("--out", help="where to write the timed file (default: the rehearsal itself)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    a = ap.parse_args()
    doc, calls = read_calls(a.rehearsal)
    import torch
    if a.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: PyTorch sees no GPU, expected to run on the rehearsal's GPU "
             "(or --device cpu to check this script)")
    seconds = timer(a.device)
    rows, names = [], set()
    print(f"{'layer':28s} {'b x h/kv x L x S x E/Ev':34s} {'forward':>18s} {'backward':>18s}"
          "  ratio")
    for c in calls:
        fwd, bwd, kernels = time_call(torch, c, a.device, seconds)
        names.update(kernels)
        row = {k: c[k] for k in ("layer", "stands_for") if k in c}
        row.update({k: c[k] for k in FIELDS + ("causal",)})
        row.update({"forward_s": fwd, "backward_s": bwd,
                    "predicted_forward_s": c.get("predicted_forward_s"),
                    "predicted_backward_s": c.get("predicted_backward_s"),
                    "kernels": kernels})
        rows.append(row)
        pf, pb = c.get("predicted_forward_s") or 0, c.get("predicted_backward_s") or 0
        shape = (f"{c['batch']} x {c['heads']}/{c['kv_heads']} x {c['seq']} x {c['keys']} x "
                 f"{c['head_dim']}/{c['value_dim']}{' causal' if c['causal'] else ''}")
        ratio = (fwd + bwd) / (pf + pb) if pf + pb > 0 else float("nan")
        print(f"{str(c.get('layer', ''))[:28]:28s} {shape:34s} {pf * 1e3:7.3f}/{fwd * 1e3:7.3f} ms"
              f" {pb * 1e3:7.3f}/{bwd * 1e3:7.3f} ms  {ratio:.2f}")
    compute = doc["compute"]
    compute["attention"] = rows
    compute["attention_kernels"] = sorted(names)
    compute["attention_timed_by"] = (f"scripts/time_attention.py, torch {torch.__version__} on "
                                     + (torch.cuda.get_device_name(0) if a.device == "cuda"
                                        else "the CPU (a check of the script, not a GPU figure)"))
    out = a.out or a.rehearsal
    write_atomically(out, doc)
    print(f"(predicted/measured; ratio: measured over predicted, forward + backward)\nwrote {out}")


if __name__ == "__main__":
    main()
