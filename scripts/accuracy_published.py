#!/usr/bin/env python3
"""Predicted against published training throughput on Selene (A100 80 GB), the figures of
docs/cost-model.md §8.5.

  python3 scripts/accuracy_published.py [--bin build/bin/shardplan] [extra plan flags...]

Megatron-LM SC21 Table 1 (Narayanan et al. 2021): each row's tp, pp, dp and full recomputation
pinned, the 2021 software's stack (megatron-2021), the rest searched; TFLOP/s per GPU from the paper's Eq. 3. Then Llama 3 405B on H100
(dgx-h100), each published tp, cp, pp and dp pinned. Korthikanti et al. 2022
Table 5: tp, pp, dp 1, ZeRO 0 and the recomputation / sequence-parallel setting pinned; the
iteration time. Extra flags (e.g. --sequence-parallel off --zero 0) go to every Table 1 run.
"""
import json
import os
import subprocess
import sys

SEQ, VOCAB = 2048, 51200

# name, tp, pp, gpus, batch, published TFLOP/s per GPU (Table 1; heads, hidden, layers in the configs)
TABLE1 = [("megatron-gpt-1.7", 1, 1, 32, 512, 137), ("megatron-gpt-3.6", 2, 1, 64, 512, 138),
          ("megatron-gpt-7.5", 4, 1, 128, 512, 142), ("megatron-gpt-18.4", 8, 1, 256, 1024, 135),
          ("megatron-gpt-39.1", 8, 2, 512, 1536, 138), ("megatron-gpt-76.1", 8, 4, 1024, 1792, 140),
          ("megatron-gpt-145.6", 8, 8, 1536, 2304, 148), ("megatron-gpt-310.1", 8, 16, 1920, 2160, 155),
          ("megatron-gpt-529.6", 8, 35, 2520, 2520, 163), ("megatron-gpt-1t", 8, 64, 3072, 3072, 163)]

# name, pp, gpus, batch, full-recompute seconds, SP + selective seconds (tp 8, dp 1)
TABLE5 = [("megatron-gpt-22b", 1, 8, 4, 1.42, 1.10), ("gpt3-175b", 8, 64, 64, 18.13, 13.75),
          ("megatron-gpt-529.6", 35, 280, 280, 49.05, 37.83), ("megatron-gpt-1t", 64, 512, 512, 94.42, 71.49)]


# Llama 3 405B pre-training (Llama Team 2024, arXiv 2407.21783, Table 4), H100: gpus, tp, cp, pp, dp,
# sequence, sequences per step, published TFLOP/s per GPU (BF16 MFU 43, 41 and 38 %).
LLAMA3 = [(8192, 8, 1, 16, 64, 8192, 2048, 430), (16384, 8, 1, 16, 128, 8192, 2048, 400),
          (16384, 8, 16, 16, 8, 131072, 128, 380)]


def best(binary, args, cluster="dgx-a100-80g", seq=SEQ):
    out = subprocess.run([binary, "plan", "--cluster", cluster, "--seq", str(seq), "--json"] + args,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["best"]


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_dims(name):
    with open(os.path.join(ROOT, "configs", "models", f"{name}.json")) as f:
        c = json.load(f)
    return c["n_embd"], c["n_layer"]


def main():
    argv = sys.argv[1:]
    binary = os.path.join(ROOT, "build", "bin", "shardplan")
    if argv[:1] == ["--bin"]:
        binary, argv = argv[1], argv[2:]
    errors = []
    print("Megatron-LM SC21 Table 1 (TFLOP/s per GPU, Eq. 3)")
    for name, tp, pp, gpus, batch, published in TABLE1:
        h, layers = model_dims(name)
        flops = 96 * batch * SEQ * layers * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * layers * h))
        b = best(binary, ["--model", name, "--gpus", str(gpus), "--global-batch", str(batch), "--tp", str(tp),
                          "--pp", str(pp), "--dp", str(gpus // (tp * pp)), "--recompute", "full",
                          "--stack", "megatron-2021"] + argv)
        x = flops / (gpus * b["step_time_s"]) / 1e12
        errors.append(abs(x / published - 1))
        print(f"  {name:20} mb {b['micro_batch']:>2} v {b['virtual_stages']} sp {int(b['sequence_parallel'])} "
              f"zero {b['zero']}: published {published}, predicted {x:6.1f} ({100 * (x / published - 1):+5.1f} %)")
    print(f"  max |error| {100 * max(errors):.1f} %, mean {100 * sum(errors) / len(errors):.1f} %")
    print("Korthikanti et al. 2022 Table 5 (seconds per iteration; the default stack, megatron)")
    for name, pp, gpus, batch, full_s, sel_s in TABLE5:
        for label, published, flags in (("full", full_s, ["--recompute", "full", "--sequence-parallel", "off"]),
                                        ("sp+selective", sel_s, ["--recompute", "selective", "--sequence-parallel", "on"])):
            b = best(binary, ["--model", name, "--gpus", str(gpus), "--global-batch", str(batch), "--tp", "8",
                              "--pp", str(pp), "--dp", "1", "--zero", "0"] + flags)
            t = b["step_time_s"]
            print(f"  {name:20} {label:13} published {published:6.2f} s, predicted {t:6.2f} s "
                  f"({100 * (published / t - 1):+5.1f} % throughput)")
    print("Llama 3 405B on H100 (TFLOP/s per GPU; shardplan counts attention as 12 L H Q s per token,")
    print("the full square, which may differ from the paper's count at long sequences)")
    for gpus, tp, cp, pp, dp, seq, batch, published in LLAMA3:
        b = best(binary, ["--model", "llama3.1-405b", "--gpus", str(gpus), "--global-batch", str(batch),
                          "--tp", str(tp), "--cp", str(cp), "--pp", str(pp), "--dp", str(dp)],
                 cluster="dgx-h100", seq=seq)
        x = b["mfu"] * 989.4  # the MFU's denominator: H100 SXM dense bf16 peak
        rc = b["recompute"] + (f" {b['recompute_layers']}/chunk" if b["recompute_layers"] else "")
        print(f"  {gpus:5} GPUs tp {tp} cp {cp:>2} pp {pp} dp {dp:>3} seq {seq:>6}: {rc:12} "
              f"mb {b['micro_batch']} v {b['virtual_stages']}: published {published}, predicted {x:5.0f} "
              f"({100 * (x / published - 1):+5.1f} %)")


if __name__ == "__main__":
    main()
