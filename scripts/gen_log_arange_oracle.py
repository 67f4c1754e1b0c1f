#!/usr/bin/env python3
"""Generate tests/data/log_arange_oracle.json: PyTorch's bits for the Mamba-2 A_log init.

transformers' Mamba-2 mixers (GraniteMoeHybrid, Bamba, NemotronH, Mamba2) initialize
A_log = log(arange(1, heads + 1)): torch.log of an int64 arange, so a float32 tensor (the default
dtype), copied into the parameter's dtype. kernels' log-index fill (FillKind::kLogIndex) claims
those bits; tests/kernels/init_fill_test.cpp replays this file against it.

Run (needs PyTorch; Debian's python3-torch 1.13 is what the checked-in file was made with):
    /usr/bin/python3 scripts/gen_log_arange_oracle.py [--out tests/data/log_arange_oracle.json]
CI never runs this script.

File format: {"generator", "torch_version", "count": N, "bits": {dtype: [uint, ...]}}: element i
is the storage bits (as an unsigned integer) of log(i + 1) in that dtype, i = 0 .. N - 1, made as
torch.empty(N, dtype).copy_(torch.log(torch.arange(1, N + 1))). "float32_not_correctly_rounded" lists
the indices at which PyTorch's float32 log differs from log rounded once from the exact value
(its vectorized log is within an ulp, not correctly rounded): the fill rounds once, so it matches
PyTorch everywhere else.
"""
import argparse
import json
import math
import struct

import torch

N = 4096
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16}


def bits(t):
    if t.dtype == torch.float64:
        return [struct.unpack("<Q", struct.pack("<d", v))[0] for v in t.tolist()]
    if t.dtype == torch.float32:
        return [struct.unpack("<I", struct.pack("<f", v))[0] for v in t.tolist()]
    return t.view(torch.int16).to(torch.int32).bitwise_and(0xFFFF).tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/log_arange_oracle.json")
    args = ap.parse_args()
    ref = torch.log(torch.arange(1, N + 1))
    assert ref.dtype == torch.float32
    out = {"generator": "scripts/gen_log_arange_oracle.py", "torch_version": torch.__version__,
           "count": N, "bits": {}}
    for name, dtype in DTYPES.items():
        out["bits"][name] = bits(torch.empty(N, dtype=dtype).copy_(ref))
    once = [struct.unpack("<f", struct.pack("<f", math.log(i + 1)))[0] for i in range(N)]
    out["float32_not_correctly_rounded"] = [
        i for i, (a, b) in enumerate(zip(ref.tolist(), once)) if a != b]
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
