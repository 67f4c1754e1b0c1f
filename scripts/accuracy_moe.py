#!/usr/bin/env python3
"""Predicted against published MoE training throughput on H100 (dgx-h100), the table of
docs/cost-model.md §8.5 "Published MoE runs, degrees pinned".

  python3 scripts/accuracy_moe.py [--bin build/bin/shardplan]

Each row pins what its source states (tp, pp, virtual stages, ep, etp, micro-batch, global batch,
precision, recomputation) and `estimate`s it; tokens per second per GPU against the published
figure. Megatron's distributed optimizer is --zero 1, FSDP2 --zero 3, activation checkpointing
--recompute full, Megatron's selective recompute lists --recompute selective. No constant is fitted
to these rows. Sources (docs/cost-model.md §8.5): NVIDIA-NeMo/Megatron-Bridge
docs/performance-summary.md (26.04.01 container, recipes at tag v0.4.2, force-balanced routing),
yanring/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md, NVIDIA-NeMo/Automodel's benchmark
table (FSDP2 with TransformerEngine kernels and DeepEP, balanced gate).
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# label, model, gpus, global batch, published tokens/s/GPU, pinned flags
ROWS = [
    ("Megatron-Bridge FP8", "qwen3-30b-a3b", 16, 1024, 8960,
     "--precision fp8 --tp 1 --pp 1 --ep 16 --micro-batch 1 --zero 1 --recompute none"),
    ("Megatron-Bridge FP8", "qwen3-235b-a22b", 256, 8192, 1712,
     "--precision fp8 --tp 2 --pp 8 --virtual-stages 4 --ep 32 --etp 1 --micro-batch 1 --zero 1 "
     "--recompute none --sequence-parallel on"),
    ("MoE ModelZoo BF16", "qwen3-235b-a22b", 256, 2048, 2048 * 4096 / (19.7 * 256),
     "--tp 2 --pp 8 --virtual-stages 4 --ep 32 --etp 1 --micro-batch 1 --zero 1 "
     "--recompute selective --sequence-parallel on"),
    ("Megatron-Bridge BF16", "gpt-oss-120b", 64, 1280, 5824,
     "--tp 1 --pp 4 --ep 8 --micro-batch 1 --zero 1 --recompute selective"),
    ("Megatron-Bridge FP8", "deepseek-v3", 1024, 8192, 1297,
     "--precision fp8 --tp 2 --pp 8 --virtual-stages 4 --ep 64 --etp 1 --micro-batch 1 --zero 1 "
     "--recompute selective --sequence-parallel on"),
    ("Automodel BF16 FSDP", "qwen3-30b-a3b", 8, 512, 12040,
     "--tp 1 --pp 1 --ep 8 --micro-batch 4 --zero 3 --recompute full"),
    ("Automodel BF16 FSDP", "deepseek-v3", 1024, 8192, 865,
     "--tp 1 --pp 4 --virtual-stages 8 --ep 64 --micro-batch 1 --zero 3 --recompute full"),
    ("Automodel BF16 FSDP", "deepseek-v3", 256, 512, 1002,
     "--tp 1 --pp 4 --virtual-stages 8 --ep 64 --micro-batch 1 --zero 3 --recompute full"),
    ("Automodel BF16 FSDP", "kimi-k2", 256, 512, 924,
     "--tp 1 --pp 8 --virtual-stages 4 --ep 32 --micro-batch 1 --zero 3 --recompute full"),
]


def main():
    argv = sys.argv[1:]
    binary = os.path.join(ROOT, "build", "bin", "shardplan")
    if argv[:1] == ["--bin"]:
        binary = argv[1]
    print(f"{'model':17} {'GPUs':>5}  {'stack':21} {'published':>9} {'predicted':>9} {'error':>7}"
          f"  {'memory/GPU':>10}")
    errors = []
    for label, model, gpus, batch, published, flags in ROWS:
        cmd = [binary, "estimate", "--model", model, "--cluster", "dgx-h100", "--gpus", str(gpus),
               "--seq", "4096", "--global-batch", str(batch), "--json"] + flags.split()
        if label.startswith("Automodel"):
            cmd += ["--stack", "automodel"]  # FSDP2 with TransformerEngine kernels
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{model:17} {gpus:5}  {label:21} refused: {run.stderr.strip()}")
            continue
        best = json.loads(run.stdout)["plan"]
        predicted = batch * 4096 / best["step_time_s"] / gpus
        err = predicted / published - 1
        errors.append(abs(err))
        print(f"{model:17} {gpus:5}  {label:21} {published:9,.0f} {predicted:9,.0f} {100 * err:+6.1f}%"
              f"  {best['memory_per_gpu_bytes'] / 2**30:8.1f} GiB")
    if errors:
        print(f"mean |error| {100 * sum(errors) / len(errors):.1f}%, max {100 * max(errors):.1f}% "
              f"over {len(errors)} rows")


if __name__ == "__main__":
    main()
