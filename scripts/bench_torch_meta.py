#!/usr/bin/env python3
"""Times PyTorch on device='meta' for the ops of tests/bench/meta_ops_bench.cpp and prints one table
next to shardplan's Google Benchmark medians: op, shardplan ns, PyTorch ns, ratio (PyTorch/shardplan).

Normally run by scripts/bench_meta_ops.sh, which builds and runs the C++ side first:
    /usr/bin/python3 scripts/bench_torch_meta.py --shardplan-json build/bench/meta_ops_shardplan.json \
        [--out build/bench/meta_ops.json] [--repetitions 10] [--min-time 0.1] [--clock wall|cpu]
Needs PyTorch (Debian's python3-torch 1.13 at /usr/bin/python3); with --no-torch, or when torch does
not import, it says so and prints shardplan's numbers only.

Note [What the PyTorch column measures]
Each op is a Python statement as a PyTorch user writes it (`x.view(8, 8, 128)`, `x + y`, `x[:, 16:48]`):
the "PyTorch" column is the Python API, so argument parsing in the Python bindings is part of the
cost, as it is for every PyTorch user. The "aten" column calls the same op through
torch.ops.aten.<op>.<overload>(...) (the dispatcher from Python, still through a Python call) for a
second view of where the time goes. The statement runs inside a generated function where the operands
are locals, in a `for _ in range(n)` loop timed as a whole with time.perf_counter_ns (wall) and
time.process_time_ns (CPU); the loop itself costs the "loop overhead" printed in the header and is not
subtracted. The result of each statement dies at the end of it, as shardplan's result dies at the end
of each benchmark iteration. gc is off while timing (as in timeit). Each of `repetitions` runs takes
at least `min_time` seconds; the median over runs is reported, like --benchmark_repetitions.

Correctness in the same run: every op's output layout is printed the way shardplan's describe() prints
it and compared with the label the C++ benchmark recorded; a mismatch is flagged and exits with 3.
"""

import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import time

# (name, Python API statement, torch.ops.aten statement). Keep in sync with meta_ops_bench.cpp: same
# names (without BM_), same shapes, same arguments. The operands are created by make_operands().
OPS = [
    ("empty", "torch.empty(64, 128, device='meta')",
     "aten.empty.memory_format([64, 128], device=meta)"),
    ("view", "x.view(8, 8, 128)", "aten.view.default(x, [8, 8, 128])"),
    ("transpose", "x.transpose(0, 1)", "aten.transpose.int(x, 0, 1)"),
    ("permute", "x4.permute(0, 2, 1, 3)", "aten.permute.default(x4, [0, 2, 1, 3])"),
    ("slice", "x[:, 16:48]", "aten.slice.Tensor(x, 1, 16, 48)"),
    ("select", "x[3]", "aten.select.int(x, 0, 3)"),
    ("expand", "row.expand(64, 128)", "aten.expand.default(row, [64, 128])"),
    ("unsqueeze", "x.unsqueeze(0)", "aten.unsqueeze.default(x, 0)"),
    ("reshape_view", "x.reshape(-1, 64)", "aten.reshape.default(x, [-1, 64])"),
    ("add", "x + y", "aten.add.Tensor(x, y)"),
    ("add_broadcast", "x + bias", "aten.add.Tensor(x, bias)"),
    ("mul_scalar", "x * 0.5", "aten.mul.Tensor(x, 0.5)"),
    ("exp", "torch.exp(x)", "aten.exp.default(x)"),
    ("gelu", "F.gelu(x)", "aten.gelu.default(x)"),
    ("matmul", "x @ w", "aten.matmul.default(x, w)"),
    ("sum", "x.sum(-1)", "aten.sum.dim_IntList(x, [-1])"),
    # 8 ops: view, transpose, view, transpose, transpose, matmul, mul, softmax.
    ("attention_scores",
     "torch.softmax((hq.view(2, 128, 8, 64).transpose(1, 2)"
     " @ hk.view(2, 128, 8, 64).transpose(1, 2).transpose(-2, -1)) * 0.125, -1)",
     "aten._softmax.default(aten.mul.Tensor(aten.matmul.default("
     "aten.transpose.int(aten.view.default(hq, [2, 128, 8, 64]), 1, 2), "
     "aten.transpose.int(aten.transpose.int(aten.view.default(hk, [2, 128, 8, 64]), 1, 2), -2, -1)"
     "), 0.125), -1, False)"),
]
# Ops per statement, for a per-op figure of the chain.
OPS_PER_CALL = {"attention_scores": 8}
# The ops the 100 ns target is about.
TARGET_NS = 100
TARGET_OPS = {"view", "transpose", "permute", "slice", "select", "expand", "unsqueeze",
              "reshape_view", "add", "add_broadcast", "mul_scalar", "exp", "gelu"}


def make_operands(torch):
    """The inputs of meta_ops_bench.cpp, on the meta device."""
    def meta(*shape):
        return torch.empty(*shape, dtype=torch.float32, device="meta")
    return {
        "x": meta(64, 128), "y": meta(64, 128), "bias": meta(128), "row": meta(1, 128),
        "x4": meta(2, 128, 8, 64), "w": meta(128, 256), "hq": meta(2, 128, 512),
        "hk": meta(2, 128, 512),
    }


def describe(t):
    """shardplan::tensor::describe() for a torch tensor."""
    dtype = str(t.dtype).replace("torch.", "")
    return (f"Tensor(sizes={list(t.shape)}, strides={list(t.stride())}, "
            f"offset={t.storage_offset()}, dtype={dtype}, device={t.device.type})")


def compile_loop(stmt, env):
    """A function running `stmt` n times with the operands as locals; returns (wall ns, cpu ns)."""
    names = sorted(env)
    params = ", ".join(f"{n}=_env[{n!r}]" for n in names)
    src = (f"def _loop(_n, {params}):\n"
           f"    _w0 = _wall(); _c0 = _cpu()\n"
           f"    for _ in range(_n):\n"
           f"        {stmt}\n"
           f"    _w1 = _wall(); _c1 = _cpu()\n"
           f"    return _w1 - _w0, _c1 - _c0\n")
    scope = {"_env": env, "_wall": time.perf_counter_ns, "_cpu": time.process_time_ns}
    exec(compile(src, f"<bench {stmt[:40]}>", "exec"), scope)
    return scope["_loop"]


def time_stmt(stmt, env, repetitions, min_time_s):
    """Median ns per statement over `repetitions` runs of >= min_time_s each: {'wall', 'cpu'}."""
    loop = compile_loop(stmt, env)
    loop(1000)  # warm up: first calls fill the dispatcher's caches
    n = 1000
    while True:  # calibrate n so that one run takes about min_time_s
        wall, _ = loop(n)
        if wall >= min_time_s * 1e9 * 0.5:
            break
        n *= 4
    n = max(1, int(n * min_time_s * 1e9 / max(wall, 1)))
    walls, cpus = [], []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repetitions):
            wall, cpu = loop(n)
            walls.append(wall / n)
            cpus.append(cpu / n)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "iterations": n}


def load_shardplan(path):
    """{op: {'wall', 'cpu', 'label'}} from Google Benchmark JSON (median aggregates)."""
    with open(path) as f:
        data = json.load(f)
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
    benches = data["benchmarks"]
    # With repetitions the medians are aggregates; without, each benchmark is one iteration run.
    medians = [b for b in benches if b.get("aggregate_name") == "median"]
    rows = {}
    for b in medians or [b for b in benches if b.get("run_type", "iteration") == "iteration"]:
        name = b.get("run_name", b["name"]).removeprefix("BM_")
        unit = scale[b.get("time_unit", "ns")]
        rows[name] = {"wall": b["real_time"] * unit, "cpu": b["cpu_time"] * unit,
                      "label": b.get("label", "")}
    return data.get("context", {}), rows


def fmt_ns(v):
    return "-" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardplan-json", required=True,
                    help="Google Benchmark JSON of bench_meta_ops_bench")
    ap.add_argument("--out", default="build/bench/meta_ops.json", help="where to write the table")
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds per repetition")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="which clock the table shows (JSON has both)")
    ap.add_argument("--no-torch", action="store_true", help="print shardplan's numbers only")
    ap.add_argument("--load-before", default="", help="`uptime` before the run, for the record")
    ap.add_argument("--load-after", default="", help="`uptime` after the C++ run")
    args = ap.parse_args()

    context, ours = load_shardplan(args.shardplan_json)
    torch = None
    if not args.no_torch:
        try:
            import torch  # noqa: PLC0415 (optional dependency)
        except ImportError as e:
            print(f"bench_torch_meta: torch is not importable by {sys.executable} ({e}); "
                  "printing shardplan's numbers only", file=sys.stderr)
    else:
        print("bench_torch_meta: --no-torch: printing shardplan's numbers only", file=sys.stderr)

    theirs, loop_overhead = {}, None
    if torch is not None:
        torch.set_grad_enabled(False)  # meta inputs do not require grad; this only skips checks
        env = make_operands(torch)
        env.update(torch=torch, F=torch.nn.functional, aten=torch.ops.aten,
                   meta=torch.device("meta"))
        loop_overhead = time_stmt("pass", env, args.repetitions, args.min_time)
        for name, py_stmt, aten_stmt in OPS:
            if name not in ours:  # filtered out of the C++ run (--filter): skip here too
                continue
            out_py = eval(py_stmt, dict(env))  # noqa: S307 (our own statements)
            out_aten = eval(aten_stmt, dict(env))  # noqa: S307
            theirs[name] = {
                "python": time_stmt(py_stmt, env, args.repetitions, args.min_time),
                "aten": time_stmt(aten_stmt, env, args.repetitions, args.min_time),
                "label": describe(out_py),
                "aten_label": describe(out_aten),
                "python_stmt": py_stmt,
                "aten_stmt": aten_stmt,
            }
            print(f"bench_torch_meta: {name}: {theirs[name]['python'][args.clock]:.0f} ns",
                  file=sys.stderr)

    clock = args.clock
    rows, mismatches = [], []
    names = [n for n, _, _ in OPS if n in ours] + sorted(set(ours) - {n for n, _, _ in OPS})
    for name in names:
        o, t = ours.get(name), theirs.get(name)
        row = {"op": name, "ops_per_call": OPS_PER_CALL.get(name, 1),
               "shardplan_ns": None if o is None else {"wall": o["wall"], "cpu": o["cpu"]},
               "torch_python_ns": None if t is None else {k: t["python"][k] for k in ("wall", "cpu")},
               "torch_aten_ns": None if t is None else {k: t["aten"][k] for k in ("wall", "cpu")},
               "torch_python_stmt": None if t is None else t["python_stmt"],
               "torch_aten_stmt": None if t is None else t["aten_stmt"],
               "shardplan_layout": None if o is None else o["label"],
               "torch_layout": None if t is None else t["label"]}
        if o is not None and t is not None:
            row["ratio"] = {k: t["python"][k] / o[k] if o[k] > 0 else math.nan
                            for k in ("wall", "cpu")}
            row["layout_match"] = o["label"] == t["label"] == t["aten_label"]
            if not row["layout_match"]:
                mismatches.append((name, o["label"], t["label"], t["aten_label"]))
        rows.append(row)

    # ---- the table ----
    print()
    print(f"meta-op dispatch, median ns per op call ({clock} clock; "
          f"{args.repetitions} repetitions each side)")
    if args.load_before:
        print(f"load before: {args.load_before.strip()}")
    if args.load_after:
        print(f"load after:  {args.load_after.strip()}")
    if torch is not None:
        print(f"PyTorch {torch.__version__} (Python {platform.python_version()}), Python API; "
              f"loop overhead {loop_overhead[clock]:.1f} ns/iter, not subtracted")
    head = f"{'op':<18} {'shardplan':>10} {'PyTorch':>10} {'ratio':>7} {'aten':>10}  layout"
    print(head)
    print("-" * len(head))
    for r in rows:
        s = None if r["shardplan_ns"] is None else r["shardplan_ns"][clock]
        p = None if r["torch_python_ns"] is None else r["torch_python_ns"][clock]
        a = None if r["torch_aten_ns"] is None else r["torch_aten_ns"][clock]
        ratio = f"{r['ratio'][clock]:.1f}x" if "ratio" in r else "-"
        check = {True: "ok", False: "MISMATCH"}.get(r.get("layout_match"), "-")
        print(f"{r['op']:<18} {fmt_ns(s):>10} {fmt_ns(p):>10} {ratio:>7} {fmt_ns(a):>10}  {check}")
    for r in rows:
        k = r["ops_per_call"]
        if k > 1 and r["shardplan_ns"] is not None:
            per_torch = ("" if r["torch_python_ns"] is None
                         else f", PyTorch {r['torch_python_ns'][clock] / k:.0f} ns/op")
            print(f"{r['op']} dispatches {k} ops: shardplan "
                  f"{r['shardplan_ns'][clock] / k:.0f} ns/op{per_torch}")
    over = [r["op"] for r in rows if r["op"] in TARGET_OPS and r["shardplan_ns"] is not None
            and r["shardplan_ns"][clock] >= TARGET_NS]
    print(f"target: view/pointwise ops < {TARGET_NS} ns median: "
          + ("all met" if not over else f"{len(over)} over ({', '.join(over)})"))
    for name, ours_l, py_l, aten_l in mismatches:
        print(f"MISMATCH {name}:\n  shardplan {ours_l}\n  PyTorch   {py_l}\n  aten      {aten_l}")

    # ---- the JSON ----
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    record = {
        "generator": "scripts/bench_torch_meta.py",
        "clock_in_table": clock,
        "repetitions": args.repetitions,
        "min_time_s": args.min_time,
        "target_ns": TARGET_NS,
        "machine": {"host": platform.node(), "nproc": os.cpu_count(),
                    "load_before": args.load_before.strip(), "load_after": args.load_after.strip(),
                    "benchmark_context": context},
        "torch": None if torch is None else {
            "version": torch.__version__, "python": platform.python_version(),
            "api": "Python API (torch_python_stmt); torch.ops.aten also timed (torch_aten_stmt)",
            "loop_overhead_ns": loop_overhead},
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")
    return 3 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
