#!/usr/bin/env python3
"""Prints log(expm1(x)) as PyTorch computes it on a 0-d tensor of each floating dtype, for the two
scalars transformers' XIELUActivation starts from (alpha_p: x = 0.8; alpha_n: x = 0.8 - beta, beta
0.5). tests/tensor/models/init_rules_test.cpp (InitRules.ApertusXieluScalarsStartInTheModelsDtype)
holds the printed values. PyTorch 1.13 has no CPU float16 expm1: that row runs each op in float32
and rounds to float16 after it, as later PyTorch versions compute half-precision ops on the CPU.
Run with a Python that has torch: /usr/bin/python3 scripts/gen_softplus_inverse_oracle.py"""
import torch

for x in (0.8, 0.8 - 0.5):
    for dt in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        t = torch.tensor(x, dtype=dt)
        if dt == torch.float16:
            v = torch.log(torch.expm1(t.float()).half().float()).half()
        else:
            v = torch.log(torch.expm1(t))
        print(f"x={x!r} {str(dt):15} {v.double().item()!r}")
