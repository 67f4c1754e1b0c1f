#!/usr/bin/env python3
"""Hostile and plausible command lines against the shardplan binary (docs/user-guide.md "Limits").

Every verb's numeric options get huge, negative, fractional and overflowing values, and its path
options get folders, devices, FIFOs, /proc files and missing folders. Each run must end within 5 s
and 500 MB (a 4 GB address-space limit guards the machine) with exit 0, 2 or 3; a failure must be
exactly one stderr line starting "shardplan: " with nothing on stdout, and no line may say
"internal error". Prints the cases that break a rule and a summary; exits 1 if any did.

    python3 scripts/hostile_cli.py [build/bin/shardplan] [--verbose]
"""
import os
import resource
import subprocess
import sys
import tempfile
import time

BIG = ["0", "-1", "1.5", "2147483648", "4294967296", "1048577", "36028797018963969",
       "9223372036854775807", "9223372036854775808", "99999999999999999999", "1e308", "x", ""]
SIZE_BUDGET_S = 5.0
MEMORY_BUDGET_KB = 500 * 1024


def cases(tmp):
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    plan_job = ["--model", "gpt2", "--cluster", "cpu-local", "--gpus", "4", "--seq", "512",
                "--global-batch", "8"]
    llama = ["--model", "llama3-8b", "--cluster", "dgx-h100"]
    out = []
    # Every numeric option of the planning verbs, one at a time, with every hostile value.
    for verb in ("plan", "estimate", "compare"):
        base = {"--gpus": "8", "--seq": "4096", "--global-batch": "64"}
        for flag in ("--gpus", "--seq", "--global-batch", "--tp", "--pp", "--dp", "--cp", "--ep",
                     "--micro-batch", "--virtual-stages", "--zero", "--recompute-layers"):
            for v in BIG:
                args = dict(base)
                args[flag] = v
                out.append([verb] + llama + [a for kv in args.items() for a in kv])
        if verb == "plan":
            for v in BIG:
                out.append(["plan"] + plan_job + ["--top", v])
    out.append(["plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus",
                "1048576", "--seq", "8192", "--global-batch", "1048576"])
    out.append(["compare", "--model", "mixtral-8x7b", "--cluster", "hgx-h200", "--gpus",
                "1048576", "--seq", "4096", "--global-batch", "1048576"])
    # DeepSeek-V4: hyper-connected streams, compressed attention, four layer kinds.
    out.append(["plan", "--model", "deepseek-v4-pro", "--cluster", "dgx-h100", "--gpus",
                "1048576", "--seq", "1048576", "--global-batch", "1048576"])
    out.append(["compare", "--model", "deepseek-v4-flash", "--cluster", "hgx-h200", "--gpus",
                "1048576", "--seq", "4096", "--global-batch", "1048576"])
    for v in BIG:
        out.append(["inspect", "--model", "deepseek-v4-pro", "--seq", v])
    # Positions: ALiBi plans any length with a note, a learned table refuses past its rows even with
    # --rope-scaling; LongCat-Flash's zero experts at a million GPUs.
    for v in BIG:
        out.append(["plan", "--model", "bloom-176b", "--cluster", "dgx-a100-80g", "--gpus", "384",
                    "--global-batch", "2048", "--seq", v])
        out.append(["plan", "--model", "opt-175b", "--cluster", "dgx-a100-80g", "--gpus", "992",
                    "--global-batch", "1024", "--rope-scaling", "--seq", v])
    # GPU counts that fill no whole node spread evenly (Note [Even nodes]): a 72-GPU NVLink rack,
    # any count, and a prime near the rank limit on 8-GPU nodes (a million single-GPU nodes).
    for v in BIG:
        out.append(["plan", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--gpus", v,
                    "--seq", "4096", "--global-batch", "4096"])
    out.append(["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "1048573",
                "--seq", "4096", "--global-batch", "1048573"])
    out.append(["compare", "--model", "longcat-flash-chat", "--cluster", "dgx-h100", "--gpus",
                "1048576", "--seq", "8192", "--global-batch", "1048576"])
    # A multimodal wrapper (its note waits for the job's acceptance), a pure state-space model
    # (no positions), Jamba and MiniMax-Text-01 (Mamba-1 and lightning mixers) at hostile lengths.
    for v in BIG:
        out.append(["plan", "--model", "minimax-m3", "--cluster", "dgx-h100", "--gpus", "1024",
                    "--global-batch", "1024", "--seq", v])
        out.append(["plan", "--model", "mamba-codestral-7b", "--cluster", "dgx-h100", "--gpus",
                    "64", "--global-batch", "64", "--seq", v])
    out.append(["compare", "--model", "jamba-1.5-large", "--cluster", "dgx-h100", "--gpus",
                "1048576", "--seq", "262144", "--global-batch", "1048576"])
    out.append(["compare", "--model", "minimax-text-01", "--cluster", "hgx-h200", "--gpus",
                "1048576", "--seq", "1048576", "--global-batch", "1048576"])
    # collective: group sizes, nodes, ranks per node, bytes.
    for flag in ("--group-size", "--nodes", "--ranks-per-node", "--gpus"):
        for v in BIG:
            args = {"--group-size": "16", "--nodes": "2"}
            args[flag] = v
            out.append(["collective", "--cluster", "dgx-h100", "--kind", "all_reduce", "--bytes",
                        "1GiB"] + [a for kv in args.items() for a in kv])
    for v in ("0", "-1", "1EiB", "9223372036854775807", "9223372036854775808B", "1e308", "1Gb"):
        out.append(["collective", "--cluster", "dgx-h100", "--kind", "all_gather",
                    "--group-size", "8", "--bytes", v])
    # inspect: batch and seq.
    for flag in ("--seq", "--batch"):
        for v in BIG:
            args = {"--seq": "1024", "--batch": "1"}
            args[flag] = v
            out.append(["inspect", "--model", "gpt2"] + [a for kv in args.items() for a in kv])
    # shard and redistribute: meshes and shapes beyond every limit.
    for mesh in ("1048576x1048576", "2147483648", "4294967296x4294967296x4294967296", "0x2", "-1"):
        out.append(["shard", "--shape", "1024,1024", "--dtype", "bf16", "--mesh", mesh,
                    "--placements", "S0,S1" if "x" in mesh else "S0"])
    for shape in ("9223372036854775807,2", "4294967296,4294967296", "-1,2", "1e308"):
        out.append(["shard", "--shape", shape, "--dtype", "bf16", "--mesh", "2x2",
                    "--placements", "S0,S1"])
    out.append(["redistribute", "--shape", "1024,4096", "--dtype", "bf16", "--mesh",
                "1024x1024", "--from", "S0,S1", "--to", "R,R", "--cluster", "dgx-h100"])
    out.append(["redistribute", "--shape", "1024,4096", "--dtype", "bf16", "--mesh",
                "2147483648x2", "--from", "S0,S1", "--to", "R,R", "--cluster", "dgx-h100"])
    # Paths: output onto a FIFO, a device, a folder, nowhere; input from the same.
    for target in (fifo, "/dev/null", tmp, os.path.join(tmp, "no", "such.json"), ""):
        out.append(["plan"] + plan_job + ["--out", target])
        out.append(["compare"] + plan_job + ["--svg", target])
        out.append(["calibrate", "--cluster", "cpu-local", "--mpi", "--out", target])
    for source in (fifo, "/dev/zero", tmp, "/proc/self/status", "/proc/self/mem",
                   os.path.join(tmp, "missing.json"), "x" * 100000):
        out.append(["materialize", "--plan", source, "--dry-run"])
        out.append(["plan", "--model", source, "--cluster", "cpu-local", "--gpus", "4",
                    "--seq", "512", "--global-batch", "8"])
        out.append(["plan", "--model", "gpt2", "--cluster", source, "--gpus", "4", "--seq",
                    "512", "--global-batch", "8"])
        out.append(["inspect", "--checkpoint", source, "--config", "gpt2"])
    return out


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def main():
    binary = os.path.abspath(next((a for a in sys.argv[1:] if not a.startswith("--")),
                                  "build/bin/shardplan"))
    verbose = "--verbose" in sys.argv
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        all_cases = cases(tmp)
        for args in all_cases:
            start = time.monotonic()
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            try:
                p = subprocess.run([binary] + args, capture_output=True, timeout=20,
                                   preexec_fn=limit_memory, cwd=tmp)
                rc, stdout, stderr = p.returncode, p.stdout, p.stderr.decode(errors="replace")
            except subprocess.TimeoutExpired:
                rc, stdout, stderr = "timeout", b"", ""
            seconds = time.monotonic() - start
            # ru_maxrss of children is the largest so far: only a new maximum is attributable.
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            problems = []
            if rc not in (0, 2, 3):
                problems.append(f"exit {rc}")
            if seconds > SIZE_BUDGET_S:
                problems.append(f"{seconds:.1f} s")
            if peak > before and peak > MEMORY_BUDGET_KB:
                problems.append(f"{peak // 1024} MB")
            if "internal error" in stderr:
                problems.append("internal error")
            if rc == 2:
                lines = stderr.splitlines()
                if len(lines) != 1 or not lines[0].startswith("shardplan: "):
                    problems.append(f"{len(lines)} stderr lines")
                if stdout:
                    problems.append("stdout on error")
            shown = " ".join(a if len(a) < 60 else a[:20] + "..." for a in args)
            if problems or verbose:
                first = stderr.splitlines()[0][:160] if stderr else ""
                print(f"{'BAD ' if problems else 'ok  '}{shown}: {', '.join(problems) or rc} {first}")
            if problems:
                bad.append(shown)
    print(f"hostile_cli: {len(all_cases) - len(bad)} of {len(all_cases)} command lines behave")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
