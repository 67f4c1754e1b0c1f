#!/usr/bin/env python3
"""scripts/time_attention.py end to end (Note [Rehearsed attention]): a rehearsal document whose
compute object is what `rehearse --device cuda` writes, with attention calls at CPU sizes.

1. Bad input (no calls, a field out of range, a call with heads not a multiple of its key/value
   heads, a file that is not a rehearsal) is one line naming the field, exit 2, the file untouched.
2. Where PyTorch is installed: the calls timed on the CPU become compute.attention rows that
   `shardplan calibrate --rehearsal` reads and compares ("attention: measured rate ...").
   Without PyTorch the test reports itself skipped (exit 77) once 1. has held.

  python3 tests/cli/time_attention_check.py --shardplan build/bin/shardplan
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "time_attention.py")

# dgx-h100's GPU: 132 SMs, a bf16 peak of 989.4 TFLOP/s. Three 8192^3 GEMMs at 0.7 of the peak
# times their shape factor (4096 tiles in 32 waves of 132: 0.9697; 8192 / 8256 reduction) and a
# 3 TB/s copy: a fit inside (0, 1], as compute_calibration_test.cpp's synthetic measurement.
SHAPE = (4096 / (32 * 132)) * (8192 / 8256)
CALLS = [
    {"layer": "dense full attention", "stands_for": "a causal square", "batch": 1, "heads": 4,
     "kv_heads": 2, "seq": 64, "keys": 64, "head_dim": 32, "value_dim": 32, "causal": True,
     "predicted_forward_s": 1e-6, "predicted_backward_s": 3e-6},
    {"layer": "dense sliding window", "stands_for": "a sliding window", "batch": 2, "heads": 2,
     "kv_heads": 2, "seq": 64, "keys": 32, "head_dim": 48, "value_dim": 32, "causal": False,
     "predicted_forward_s": 1e-6, "predicted_backward_s": 3e-6},
]
DOC = {
    "format": "shardplan.rehearsal",
    "model": "llama3-8b",
    "cluster": "dgx-h100",
    "links": [],
    "compute": {
        "device": "NVIDIA H100 80GB HBM3",
        "streaming_multiprocessors": 132,
        "memory_bytes": 85000000000,
        "cuda": "13.0",
        "source": "time_attention_check.py",
        "hbm": {"copy_bytes_per_s": 3.0e12},
        "bf16_gemm": [{"m": 8192, "n": 8192, "k": 8192, "flops_per_s": 0.7 * 989.4e12 * SHAPE}
                      for _ in range(3)],
        "layers": [],
        "attention_stack": "megatron",
        "attention_calls": CALLS,
    },
}


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardplan", required=True)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    fails = []
    work = tempfile.mkdtemp(prefix="time_attention_check.")

    def bad(name, doc, want):
        path = os.path.join(work, name + ".json")
        text = json.dumps(doc) if not isinstance(doc, str) else doc
        with open(path, "w") as f:
            f.write(text)
        r = run([a.python, SCRIPT, path, "--device", "cpu"])
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1 or want not in lines[0]:
            fails.append(f"{name}: exit {r.returncode}, stderr {r.stderr.strip()[:200]!r}, "
                         f"want exit 2 and one line with {want!r}")
        with open(path) as f:
            if f.read() != text:
                fails.append(f"{name}: the file was changed")

    no_calls = copy.deepcopy(DOC)
    del no_calls["compute"]["attention_calls"]
    bad("no_calls", no_calls, "compute.attention_calls")
    huge = copy.deepcopy(DOC)
    huge["compute"]["attention_calls"][1]["keys"] = 1 << 40
    bad("huge_keys", huge, "attention_calls[1].keys")
    flt = copy.deepcopy(DOC)
    flt["compute"]["attention_calls"][0]["seq"] = 64.5
    bad("float_seq", flt, "attention_calls[0].seq")
    gqa = copy.deepcopy(DOC)
    gqa["compute"]["attention_calls"][0]["kv_heads"] = 3
    bad("heads_not_multiple", gqa, "expected a multiple")
    bad("not_a_rehearsal", {"format": "shardplan.plan"}, "field 'format'")
    bad("not_json", "{", "expected a rehearsal file")

    have_torch = run([a.python, "-c", "import torch"]).returncode == 0
    if have_torch and not fails:
        path = os.path.join(work, "r.json")
        with open(path, "w") as f:
            json.dump(DOC, f)
        r = run([a.python, SCRIPT, path, "--device", "cpu"])
        if r.returncode != 0:
            fails.append(f"timing on the CPU: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        else:
            timed = json.load(open(path))["compute"]
            rows = timed.get("attention", [])
            if len(rows) != len(CALLS):
                fails.append(f"{len(rows)} attention rows for {len(CALLS)} calls")
            for row, call in zip(rows, CALLS):
                for k in ("batch", "heads", "kv_heads", "seq", "keys", "head_dim", "value_dim",
                          "causal"):
                    if row.get(k) != call[k]:
                        fails.append(f"row {call['layer']}: {k} {row.get(k)} for {call[k]}")
                if not (row.get("forward_s", 0) > 0 and row.get("backward_s", 0) > 0):
                    fails.append(f"row {call['layer']}: forward {row.get('forward_s')}, "
                                 f"backward {row.get('backward_s')}, want positive seconds")
            c = run([a.shardplan, "calibrate", "--cluster", "dgx-h100", "--rehearsal", path,
                     "--out", os.path.join(work, "fitted.json")])
            if c.returncode != 0 or "attention: measured rate" not in c.stdout:
                fails.append(f"calibrate --rehearsal of the timed file: exit {c.returncode}, "
                             f"{(c.stderr or c.stdout).strip()[:300]!r}")
    for f in fails:
        print(f)
    if fails:
        return 1
    if not have_torch:
        print("bad input refused; timing skipped: no PyTorch for", a.python)
        return 77
    print("time_attention.py: bad input refused, calls timed on the CPU and compared by calibrate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
