#!/usr/bin/env python3
"""Times PyTorch's GPU fills on one CUDA device, the peer of shardplan's CUDA fill benchmark
(build/bin/bench_init_fill_cuda, tests/bench/init_fill_cuda_bench.cu), and prints GB/s (1e9 bytes
written per second; the copy counts bytes read plus bytes written, as nvbandwidth does):

    python3 scripts/bench_init_fill_cuda_torch.py [--gib 4] [--repetitions 10]

For float32 and bfloat16 buffers of `gib` GiB: normal_(0, 0.02), uniform_(-0.1, 0.1), fill_(0.02)
and copy_ (device to device, same size). Each is timed with CUDA events over `repetitions` calls
after two warm-ups; the best and the median call are printed, with the device's name.
PyTorch's values differ from shardplan's (its own generator and transform); only speed is compared.
"""

import argparse
import statistics
import sys

try:
    import torch
except ImportError:
    sys.exit("PyTorch does not import; this script needs PyTorch with CUDA")


def time_op(op, repetitions):
    for _ in range(2):
        op()
    torch.cuda.synchronize()
    times = []
    for _ in range(repetitions):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        op()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    return min(times), statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=4.0, help="buffer size in GiB (default 4)")
    parser.add_argument("--repetitions", type=int, default=10)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device is visible to PyTorch")
    nbytes = int(args.gib * (1 << 30))
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, {args.gib:g} GiB buffers, "
          f"{args.repetitions} timed calls each")
    for name, dtype, size in (("float32", torch.float32, 4), ("bfloat16", torch.bfloat16, 2)):
        x = torch.empty(nbytes // size, dtype=dtype, device="cuda")
        y = torch.empty_like(x)
        ops = (("normal", lambda: x.normal_(0.0, 0.02), nbytes),
               ("uniform", lambda: x.uniform_(-0.1, 0.1), nbytes),
               ("constant", lambda: x.fill_(0.02), nbytes),
               ("copy", lambda: y.copy_(x), 2 * nbytes))
        for op_name, op, moved in ops:
            best, median = time_op(op, args.repetitions)
            print(f"torch {op_name:8s} {name:9s} best {best * 1e3:8.3f} ms {moved / best / 1e9:8.1f} GB/s"
                  f"   median {median * 1e3:8.3f} ms {moved / median / 1e9:8.1f} GB/s")
        del x, y
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
