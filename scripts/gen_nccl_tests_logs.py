#!/usr/bin/env python3
"""Write the nccl-tests logs of tests/collectives/calibration_test.cpp into tests/data/nccl_tests/.

Run:  python3 scripts/gen_nccl_tests_logs.py [--out tests/data/nccl_tests]
Standard library only. Each log is what an nccl-tests binary prints (the layout of its
src/common.cu: device list, column header, one row per size, footer), with times synthesized from
a known latency and bandwidth, so the calibration fit is checked against numbers chosen here, not
against its own arithmetic. Times are printed as nccl-tests prints them (2 decimals below 100 us,
1 below 10000 us, none above); the exact logs use sizes whose times need no rounding.

Model (the cost model's Ring/Simple formula, Note [Calibration] in collectives/calibration.cpp):
  t_us = base + steps * l_in + inter * l_net + S * busbw_factor / (bandwidth_GBps * 1e3)

Files:
  all_reduce_perf_h100_8gpu.log     dgx-h100, 8 ranks on one node, all_reduce, current format
                                    (root and #wrong columns). l_in = 0.5 us, B_in = 350 GB/s:
                                    t = 8.4 + 14 x 0.5 + S x 1.75 / 350e3 = 15.4 + S / 200000.
  all_reduce_perf_a100_2node.log    dgx-a100-80g, 2 nodes x 8 ranks, all_reduce, the older format
                                    (no root column, "error" columns, no "Collective test starting"
                                    line: the kind comes from the file name), with mpirun's help
                                    lines among the rows. l_in = 3.4 (the file's), l_net = 10 us,
                                    8 NICs of 22.5 GB/s: t = 8.4 + 28 x 3.4 + 2 x 10 +
                                    S x 1.875 / (8 x 22.5e3) = 123.6 + S / 96000.
  all_gather_perf_h100_noisy.log    dgx-h100, 8 ranks, all_gather, 1 KiB .. 8 GiB by powers of 2,
                                    l_in = 0.5 us, B_in = 350 GB/s (t = 11.9 + S x 7/8 / 350e3),
                                    every time multiplied by a uniform factor in [0.97, 1.03]
                                    (random.Random(4)).
  truncated_all_reduce_perf.log     the first log cut in the middle of its 5th row (line 23).
"""
import argparse
import os
import random

HEADER_NEW = ("#       size         count      type   redop    root     time   algbw   busbw #wrong"
              "     time   algbw   busbw #wrong")
UNITS_NEW = ("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
             "     (us)  (GB/s)  (GB/s)       ")
HEADER_OLD = ("#       size         count      type   redop     time   algbw   busbw  error"
              "     time   algbw   busbw  error")
UNITS_OLD = ("#        (B)    (elements)                       (us)  (GB/s)  (GB/s)       "
             "     (us)  (GB/s)  (GB/s)       ")


def fmt_time(t):
    if t >= 10000:
        return "%7.0f" % t
    if t >= 100:
        return "%7.1f" % t
    return "%7.2f" % t


def factor(kind, n):
    return {"all_reduce": 2.0 * (n - 1) / n, "all_gather": (n - 1) / n}[kind]


def rank_lines(hosts, per_host, gpu):
    out = ["# Using devices"]
    rank = 0
    for h in hosts:
        for d in range(per_host):
            out.append("#  Rank %2d Group  0 Pid %6d on %s device %2d [0000:%02x:00] %s"
                       % (rank, 4000 + rank, h, d, 0x18 + 16 * d, gpu))
            rank += 1
    return out


def rows(kind, n, sizes, time_fn, new_format, rng=None):
    out = []
    for s in sizes:
        count = s // 4 if kind == "all_reduce" else s // 4 // n
        cols = ["%12d" % s, "%12d" % count, "%8s" % "float",
                "%6s" % ("sum" if kind == "all_reduce" else "none")]
        if new_format:
            cols.append("%6d" % -1)
        for _ in range(2):  # out-of-place, in-place
            t = time_fn(s)
            if rng is not None:
                t *= rng.uniform(0.97, 1.03)
            printed = fmt_time(t)
            algbw = s / float(printed) / 1e3
            cols += [printed, "%6.2f" % algbw, "%6.2f" % (algbw * factor(kind, n)),
                     "%6d" % 0 if new_format else "%6s" % "0e+00"]
        out.append("  ".join(cols))
    return out


def footer(name):
    return ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0 ", "#",
            "# Collective test concluded: %s" % name, "#"]


def h100_8gpu():
    sizes = [2000000 * k for k in range(1, 17)]
    lines = ["# nccl-tests version 2.18.3 nccl-headers=23007 nccl-library=23007",
             "# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 2000000 maxBytes 32000000 step: 2000000(bytes) "
             "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
             "#"]
    lines += rank_lines(["dgx-h100-001"], 8, "NVIDIA H100 80GB HBM3")
    lines += ["NCCL version 2.30.7+cuda12.8", "#",
              "#                                                              out-of-place"
              "                       in-place          ", HEADER_NEW, UNITS_NEW]
    lines += rows("all_reduce", 8, sizes, lambda s: 15.4 + s / 200000.0, True)
    return lines + footer("all_reduce_perf")


def a100_2node():
    sizes = [960000 * k for k in range(1, 17)]
    lines = ["# nThread 1 nGpus 1 minBytes 960000 maxBytes 15360000 step: 960000(bytes) "
             "warmup iters: 5 iters: 20 validation: 1", "#"]
    lines += rank_lines(["selene-0101", "selene-0102"], 8, "NVIDIA A100-SXM4-80GB")
    lines += ["#", "#                                                      out-of-place"
              "                       in-place          ", HEADER_OLD, UNITS_OLD]
    body = rows("all_reduce", 16, sizes, lambda s: 123.6 + s / 96000.0, False)
    # mpirun's aggregated help messages land among the rows in real logs.
    body.insert(3, "[selene-0101:04321] 15 more processes have sent help message "
                   "help-mpi-btl-openib.txt / no device params found")
    body.insert(4, "[selene-0101:04321] Set MCA parameter \"orte_base_help_aggregate\" to 0 "
                   "to see all help / error messages")
    lines += body
    return lines + ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0 ", "#"]


def h100_noisy():
    rng = random.Random(4)
    sizes = [1 << k for k in range(10, 34)]
    lines = ["# nccl-tests version 2.18.3 nccl-headers=23007 nccl-library=23007",
             "# Collective test starting: all_gather_perf",
             "# nThread 1 nGpus 8 minBytes 1024 maxBytes 8589934592 step: 2(factor) "
             "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
             "#"]
    lines += rank_lines(["dgx-h100-002"], 8, "NVIDIA H100 80GB HBM3")
    lines += ["#", "#                                                              out-of-place"
              "                       in-place          ", HEADER_NEW, UNITS_NEW]
    lines += rows("all_gather", 8, sizes, lambda s: 11.9 + s * 7 / 8 / 350e3, True, rng)
    return lines + footer("all_gather_perf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                  "nccl_tests"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    exact = h100_8gpu()
    files = {
        "all_reduce_perf_h100_8gpu.log": exact,
        "all_reduce_perf_a100_2node.log": a100_2node(),
        "all_gather_perf_h100_noisy.log": h100_noisy(),
    }
    # Cut in the middle of the 5th row: what a killed job leaves behind.
    first_row = next(i for i, l in enumerate(exact) if l.strip() and l.lstrip()[0].isdigit())
    cut = exact[:first_row + 5]
    cut[-1] = cut[-1][:cut[-1].index("float") + 5]
    files["truncated_all_reduce_perf.log"] = cut
    for name, lines in files.items():
        with open(os.path.join(args.out, name), "w") as f:
            f.write("\n".join(lines) + ("\n" if name != "truncated_all_reduce_perf.log" else ""))


if __name__ == "__main__":
    main()
