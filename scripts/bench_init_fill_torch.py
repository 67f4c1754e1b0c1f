#!/usr/bin/env python3
"""Times PyTorch's CPU normal fill, torch.empty(n, dtype=...).normal_(), on the buffers of
tests/bench/init_fill_bench.cpp (64 MiB: 16M float32 or 32M bfloat16 elements) and prints GB/s
(1e9 bytes written per second), to set next to shardplan's BM_NormalFill numbers:

    build/bin/bench_init_fill_bench --benchmark_filter='NormalFill|Memset'
    /usr/bin/python3 scripts/bench_init_fill_torch.py [--threads 2] [--repetitions 5] [--mib 64]

The buffer is allocated once and touched (as the C++ benchmark's std::vector is); each timed call
is one normal_(mean=0, std=0.02) over the whole buffer, under torch.set_num_threads(threads) (the
intra-op pool, which normal_ on CPU uses for large tensors). The best and median of `repetitions`
timed calls after one warm-up are printed. PyTorch's values differ from shardplan's (its own
generator and transform); only the speed is compared.
Needs PyTorch (Debian: apt-get install python3-torch, for /usr/bin/python3).
"""

import argparse
import statistics
import sys
import time

try:
    import torch
except ImportError:
    sys.exit("PyTorch does not import: apt-get install python3-torch, then run it with /usr/bin/python3")


def time_normal(dtype, numel, repetitions):
    x = torch.empty(numel, dtype=dtype)
    x.zero_()  # touch every page before timing
    x.normal_(0.0, 0.02)  # warm-up: generator state, thread pool
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        x.normal_(0.0, 0.02)
        times.append(time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--mib", type=int, default=64, help="buffer size in MiB (default 64)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    nbytes = args.mib << 20
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.mib} MiB buffers, "
          f"{args.repetitions} timed calls each")
    for name, dtype, size in (("float32", torch.float32, 4), ("bfloat16", torch.bfloat16, 2)):
        times = time_normal(dtype, nbytes // size, args.repetitions)
        best, median = min(times), statistics.median(times)
        print(f"normal_ {name:9s} best {best * 1e3:8.1f} ms  {nbytes / best / 1e9:6.3f} GB/s   "
              f"median {median * 1e3:8.1f} ms  {nbytes / median / 1e9:6.3f} GB/s")


if __name__ == "__main__":
    main()
