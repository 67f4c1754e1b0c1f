#!/usr/bin/env python3
"""The golden corpus: the --json output of a fixed set of commands, kept byte for byte.

A refactoring must leave every prediction, plan and report of these commands unchanged; a change
that is meant is its own commit, with the files rewritten by --update and the reason in its
message. Timings (search_seconds, seconds, init_seconds) are dropped and the repository's path is
written as <root>; everything else is compared exactly, key order included. Each file in
tests/data/golden/ holds the command, its exit code and its output.

    python3 tests/cli/golden_json.py --shardplan build/bin/shardplan            # compare (ctest)
    python3 tests/cli/golden_json.py --shardplan build/bin/shardplan --update   # rewrite the files
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")
TIMINGS = {"search_seconds", "seconds", "init_seconds"}

H100_64 = ["--cluster", "dgx-h100", "--gpus", "64", "--seq", "4096", "--global-batch", "256"]
CPU_4 = ["--cluster", "cpu-local", "--gpus", "4", "--seq", "512", "--global-batch", "8"]

# name -> arguments; "{tmp}" is a scratch folder shared by the commands, which run in this order.
CORPUS = [
    # plan: the shipped models on the shipped clusters, pins of every dimension, and no fit.
    ("plan-llama3-8b-h100-64", ["plan", "--model", "llama3-8b"] + H100_64),
    ("plan-llama3-70b-h100-64-explain", ["plan", "--model", "llama3-70b"] + H100_64 + ["--top", "5", "--explain"]),
    ("plan-llama3.1-405b-h100-16384", ["plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "16384", "--seq", "8192", "--global-batch", "2048", "--top", "3"]),
    ("plan-mixtral-h100-64", ["plan", "--model", "mixtral-8x7b"] + H100_64),
    ("plan-mixtral-h200-64-ep8-pp2", ["plan", "--model", "mixtral-8x7b", "--cluster", "hgx-h200", "--gpus", "64", "--seq", "4096", "--global-batch", "256", "--ep", "8", "--pp", "2"]),
    ("plan-gpt2-cpu-4", ["plan", "--model", "gpt2"] + CPU_4),
    ("plan-pythia-cpu-4", ["plan", "--model", "pythia-160m"] + CPU_4),
    ("plan-gpt3-a100-1024", ["plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80g", "--gpus", "1024", "--seq", "2048", "--global-batch", "1536", "--top", "3"]),
    ("plan-megatron-1t-a100-3072", ["plan", "--model", "megatron-gpt-1t", "--cluster", "dgx-a100-80g", "--gpus", "3072", "--seq", "2048", "--global-batch", "3072", "--tp", "8", "--pp", "64", "--recompute", "full", "--top", "3"]),
    ("plan-qwen2.5-h200-16", ["plan", "--model", "qwen2.5-7b", "--cluster", "hgx-h200", "--gpus", "16", "--seq", "8192", "--global-batch", "64"]),
    ("plan-llama3.1-405b-gb200-256", ["plan", "--model", "llama3.1-405b", "--cluster", "gb200-nvl72", "--gpus", "256", "--seq", "8192", "--global-batch", "1536", "--top", "3"]),
    ("plan-llama3-8b-h100-12", ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "12", "--seq", "4096", "--global-batch", "48", "--top", "3"]),
    ("plan-gemma-b200-8", ["plan", "--model", "gemma-7b", "--cluster", "dgx-b200", "--gpus", "8", "--seq", "8192", "--global-batch", "32"]),
    ("plan-mistral-h100-8-fp8", ["plan", "--model", "mistral-7b", "--cluster", "dgx-h100", "--gpus", "8", "--seq", "4096", "--global-batch", "64", "--precision", "fp8"]),
    ("plan-llama2-a100-40g-32", ["plan", "--model", "llama2-7b", "--cluster", "dgx-a100-40g", "--gpus", "32", "--seq", "4096", "--global-batch", "128"]),
    ("plan-neox-a100-64-attention-math", ["plan", "--model", "gpt-neox-20b", "--cluster", "dgx-a100-80g", "--gpus", "64", "--seq", "2048", "--global-batch", "512", "--attention", "math"]),
    ("plan-llama3-8b-cp2-zero3", ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--seq", "8192", "--global-batch", "64", "--cp", "2", "--zero", "3"]),
    ("plan-llama3-70b-interleaved", ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq", "4096", "--global-batch", "256", "--pp", "8", "--tp", "8", "--virtual-stages", "5"]),
    ("plan-llama3-70b-recompute-layers", ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq", "4096", "--global-batch", "256", "--tp", "8", "--pp", "4", "--recompute-layers", "3"]),
    ("plan-405b-h100-8-nothing-fits", ["plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "8", "--seq", "4096", "--global-batch", "64"]),
    ("plan-megatron-18.4-a100-256", ["plan", "--model", "megatron-gpt-18.4", "--cluster", "dgx-a100-80g", "--gpus", "256", "--seq", "2048", "--global-batch", "1024", "--tp", "8", "--pp", "1", "--recompute", "full"]),
    # estimate: one configuration each, pipelined ones included (their bill).
    ("estimate-llama3-8b-tp8-pp2", ["estimate", "--model", "llama3-8b"] + H100_64 + ["--tp", "8", "--pp", "2", "--micro-batch", "2", "--recompute", "selective"]),
    ("estimate-llama3-70b-pp4-tp4", ["estimate", "--model", "llama3-70b"] + H100_64 + ["--pp", "4", "--tp", "4"]),
    ("estimate-llama3-70b-pp8-v5", ["estimate", "--model", "llama3-70b"] + H100_64 + ["--pp", "8", "--tp", "8", "--virtual-stages", "5"]),
    ("estimate-405b-pp16-tp8", ["estimate", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "1024", "--seq", "8192", "--global-batch", "512", "--pp", "16", "--tp", "8"]),
    ("estimate-llama3-8b-cp2-zero3", ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--seq", "8192", "--global-batch", "64", "--cp", "2", "--zero", "3"]),
    ("estimate-mixtral-ep8-pp2", ["estimate", "--model", "mixtral-8x7b"] + H100_64 + ["--ep", "8", "--pp", "2"]),
    ("estimate-gpt2-cpu-dp4", ["estimate", "--model", "gpt2"] + CPU_4),
    ("estimate-405b-does-not-fit", ["estimate", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "8", "--seq", "4096", "--global-batch", "64"]),
    # compare: the named strategies.
    ("compare-llama3-70b-h100-64", ["compare", "--model", "llama3-70b"] + H100_64),
    ("compare-mixtral-h200-64", ["compare", "--model", "mixtral-8x7b", "--cluster", "hgx-h200", "--gpus", "64", "--seq", "4096", "--global-batch", "256"]),
    ("compare-gpt2-cpu-4", ["compare", "--model", "gpt2"] + CPU_4),
    # materialize --dry-run of plans written here (and the plans themselves).
    ("plan-out-gpt2-cpu-4", ["plan", "--model", "gpt2"] + CPU_4 + ["--out", "{tmp}/gpt2.json"]),
    ("dry-run-gpt2-cpu-4", ["materialize", "--plan", "{tmp}/gpt2.json", "--dry-run"]),
    ("plan-out-llama3-70b-h100-64", ["plan", "--model", "llama3-70b"] + H100_64 + ["--out", "{tmp}/llama70.json"]),
    ("dry-run-llama3-70b-h100-64", ["materialize", "--plan", "{tmp}/llama70.json", "--dry-run"]),
    ("plan-out-mixtral-ep", ["plan", "--model", "mixtral-8x7b"] + H100_64 + ["--ep", "8", "--out", "{tmp}/mixtral.json"]),
    ("dry-run-mixtral-ep", ["materialize", "--plan", "{tmp}/mixtral.json", "--dry-run"]),
    ("plan-out-405b-16384", ["plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "16384", "--seq", "8192", "--global-batch", "2048", "--out", "{tmp}/405b.json"]),
    ("dry-run-405b-16384", ["materialize", "--plan", "{tmp}/405b.json", "--dry-run"]),
    # redistribute and inspect.
    ("redistribute-greedy", ["redistribute", "--shape", "1024,4096", "--dtype", "bf16", "--mesh", "2x4", "--mesh-names", "dp,tp", "--from", "S0,S1", "--to", "R,R", "--cluster", "dgx-h100", "--nodes", "2"]),
    ("redistribute-min-cost", ["redistribute", "--shape", "8192,4096", "--dtype", "bf16", "--mesh", "4x8", "--from", "S0,S1", "--to", "S1,R", "--planner", "min-cost", "--cluster", "dgx-h100"]),
    ("inspect-llama3-8b", ["inspect", "--model", "llama3-8b", "--seq", "4096"]),
    ("inspect-mixtral", ["inspect", "--model", "mixtral-8x7b", "--seq", "2048", "--batch", "2"]),
    ("inspect-deepseek-v3", ["inspect", "--model", "deepseek-v3", "--seq", "4096"]),
    ("inspect-gpt-oss-120b", ["inspect", "--model", "gpt-oss-120b", "--seq", "4096"]),
    ("estimate-gpt-oss-120b-ep8", ["estimate", "--model", "gpt-oss-120b"] + H100_64 + ["--ep", "8", "--tp", "1", "--pp", "1"]),
    ("estimate-gemma2-9b-cp2", ["estimate", "--model", "gemma-2-9b", "--cluster", "dgx-h100", "--gpus", "64", "--seq", "8192", "--global-batch", "128", "--cp", "2", "--tp", "2", "--pp", "1"]),
    ("inspect-gpt2", ["inspect", "--model", "gpt2"]),
]


def normalized(doc):
    """The document without timings, the repository's path as <root>."""
    if isinstance(doc, dict):
        return {k: normalized(v) for k, v in doc.items() if k not in TIMINGS}
    if isinstance(doc, list):
        return [normalized(v) for v in doc]
    if isinstance(doc, str):
        return doc.replace(ROOT, "<root>")
    return doc


def run(shardplan, args, tmp):
    argv = [shardplan, "--json"] + [a.replace("{tmp}", tmp) for a in args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    try:
        out = normalized(json.loads(p.stdout)) if p.stdout.strip() else None
    except json.JSONDecodeError:
        out = {"not_json": p.stdout}
    return {"command": ["shardplan", "--json"] + args, "exit": p.returncode, "output": out}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardplan", required=True)
    ap.add_argument("--update", action="store_true", help="rewrite the golden files")
    a = ap.parse_args()
    shardplan = os.path.abspath(a.shardplan)
    os.makedirs(GOLDEN, exist_ok=True)
    differ = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in CORPUS:
            got = run(shardplan, args, tmp)
            text = json.dumps(got, indent=1) + "\n"
            path = os.path.join(GOLDEN, name + ".json")
            if a.update:
                with open(path, "w") as f:
                    f.write(text)
                continue
            want = open(path).read() if os.path.exists(path) else ""
            if text != want:
                differ.append(name)
                # The first differing line, to say where without a diff tool.
                for i, (x, y) in enumerate(zip(text.splitlines(), want.splitlines())):
                    if x != y:
                        print(f"{name}: line {i + 1}\n  golden: {y.strip()[:200]}\n  now:    {x.strip()[:200]}")
                        break
                else:
                    print(f"{name}: {'missing golden file' if not want else 'length differs'}")
    if a.update:
        print(f"golden_json: wrote {len(CORPUS)} files to {GOLDEN}")
        return 0
    print(f"golden_json: {len(CORPUS) - len(differ)} of {len(CORPUS)} outputs identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
