#!/usr/bin/env python3
"""Hostile model configs by mutation: each run takes a seed of tests/fuzz/corpus/model_config,
sets one to three of its fields (or fields families read) to an extreme or ill-typed value, and
runs `inspect` and `plan` on it. Every run must end with exit 0, 2 (bad input: one line on stderr)
or 3 (nothing fits); anything else (an internal error, a crash) is printed and counted. Outside CI:
a complement to scripts/fuzz.sh's libFuzzer harness, which needs a clang build; this needs only the
shardplan binary.
  python3 scripts/mutate_model_configs.py build/bin/shardplan [runs] [random seed] [seed names]
[seed names]: only the seeds whose file name contains it ("gemma4"). A multimodal seed's
text_config is mutated half the time, its outer object otherwise."""
import glob
import json
import os
import random
import subprocess
import sys
import tempfile

EXTREMES = [0, -1, 1, 2, 3, 7, 2**31, 2**62, 2**63 - 1, -2**63, 1e308, -1e308, 1e-300, 0.5,
            None, True, "x", [], {}, [1, 2]]
KEYS = ["num_hidden_layers", "num_key_value_heads", "head_dim", "v_head_dim", "sliding_window",
        "num_experts", "moe_intermediate_size", "num_shared_experts", "num_dense_layers",
        "block_ff_dim", "block_ffn_dim_multiplier", "conv_L_cache", "full_attn_idxs",
        "layer_types", "layer_rope_theta", "attention_value_scale", "global_attn_every_n_layers",
        "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v", "per_layer_config",
        "num_kv_shared_layers", "hidden_size_per_layer_input", "vocab_size_per_layer_input",
        "enable_moe_block", "top_k_experts", "rope_parameters", "pad_token_id"]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/bin/shardplan"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    random.seed(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    here = os.path.dirname(os.path.abspath(__file__))
    seeds = sorted(glob.glob(os.path.join(here, "..", "tests", "fuzz", "corpus", "model_config",
                                          "*.json")))
    if len(sys.argv) > 4:
        seeds = [x for x in seeds if sys.argv[4] in os.path.basename(x)]
    bad = done = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        for _ in range(runs):
            with open(random.choice(seeds)) as f:
                try:
                    doc = json.load(f)
                except ValueError:
                    continue  # a seed that is not JSON on purpose
            if not isinstance(doc, dict):
                continue
            target = doc
            if isinstance(doc.get("text_config"), dict) and random.random() < 0.5:
                target = doc["text_config"]
            for _ in range(random.randint(1, 3)):
                key = random.choice([k for k in target if k != "model_type"] + KEYS)
                target[key] = random.choice(EXTREMES)
            with open(path, "w") as f:
                json.dump(doc, f)
            for args in (["inspect", "--model", path],
                         ["plan", "--model", path, "--cluster", "dgx-h100", "--gpus", "8",
                          "--seq", "256", "--global-batch", "8"]):
                r = subprocess.run([binary] + args, capture_output=True, text=True, timeout=120)
                done += 1
                lines = r.stderr.strip().splitlines()
                if r.returncode not in (0, 2, 3) or (r.returncode == 2 and len(lines) != 1):
                    bad += 1
                    print(f"exit {r.returncode}: {json.dumps(doc)[:400]}\n  {r.stderr[-400:]}")
                    break
    print(f"mutate_model_configs: {done} runs, {bad} misbehaved")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
