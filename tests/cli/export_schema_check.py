#!/usr/bin/env python3
"""ctest `export_schema`: `shardplan export` output against the frameworks' pinned option lists.

For plans of several shapes (dense and MoE; uniform, uneven and interleaved pipelines; ZeRO 0-3;
recomputation; fp8; torchtitan eager and compile), the export must:
- Megatron-LM: use only option names of tests/data/frameworks/megatron_lm_args.txt, state the
  plan's degrees, and give a pipeline layout whose stages are pp x v with the model's layers once;
- torchtitan: parse with tomllib and use only sections and keys of torchtitan_job_config.json,
  the degrees multiplying to the world, the model parts holding every layer once;
- DeepSpeed: parse with json, use only keys of deepspeed_config_keys.json, and state the batch
  arithmetic (train_batch_size = micro x accumulation x dp);
and refuse (exit 2, one line) what a framework cannot express.
  python3 tests/cli/export_schema_check.py --shardplan build/bin/shardplan
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "frameworks")


def load_schemas():
    megatron = {line.strip() for line in open(os.path.join(DATA, "megatron_lm_args.txt"))
                if line.startswith("--")}
    titan = json.load(open(os.path.join(DATA, "torchtitan_job_config.json")))["sections"]
    ds = json.load(open(os.path.join(DATA, "deepspeed_config_keys.json")))
    return megatron, titan, ds


def run(shardplan, args, expect=0):
    p = subprocess.run([shardplan] + args, capture_output=True, text=True)
    if p.returncode != expect:
        raise AssertionError(f"shardplan {' '.join(args)}: exit {p.returncode}, expected {expect}\n"
                             f"{p.stdout}\n{p.stderr}")
    return p


def check_megatron(text, plan, names, failures, label):
    flags = re.findall(r"^(--[a-z0-9-]+)(?: (.*))?$", text, re.M)
    for flag, _ in flags:
        if flag not in names:
            failures.append(f"{label}: megatron option {flag} is not in the pinned parser")
    values = {f: v for f, v in flags}
    mesh = dict(zip(plan["mesh"]["names"], plan["mesh"]["shape"]))
    c = plan["config"]
    want = {"--tensor-model-parallel-size": c["tp"], "--pipeline-model-parallel-size": c["pp"],
            "--micro-batch-size": c["micro_batch"],
            "--global-batch-size": plan["setup"]["global_batch"]}
    for flag, v in want.items():
        if values.get(flag) != str(v):
            failures.append(f"{label}: {flag} {values.get(flag)}, the plan has {v}")
    if c["cp"] > 1 and values.get("--context-parallel-size") != str(c["cp"]):
        failures.append(f"{label}: cp {c['cp']} not exported")
    if mesh["tp"] != c["tp"] or mesh["pp"] != c["pp"]:
        failures.append(f"{label}: the plan's mesh and config disagree")
    layers = sum(plan["stage_layers"])
    layout = values.get("--pipeline-model-parallel-layout")
    if layout is not None:
        stages = layout.split("|")
        if len(stages) != c["pp"] * c["virtual_stages"]:
            failures.append(f"{label}: layout has {len(stages)} stages, want pp x v")
        if layout.count("t") != layers or not layout.startswith("E") or not layout.endswith("L"):
            failures.append(f"{label}: layout {layout[:40]}... does not hold {layers} layers E..L")
        if "--num-virtual-stages-per-pipeline-rank" in values:
            failures.append(f"{label}: layout and virtual stages given together")
    elif c["virtual_stages"] > 1 and \
            values.get("--num-virtual-stages-per-pipeline-rank") != str(c["virtual_stages"]):
        failures.append(f"{label}: v {c['virtual_stages']} not exported")


def check_titan(text, plan, schema, failures, label):
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        failures.append(f"{label}: not TOML: {e}")
        return

    def walk(table, prefix):
        for key, value in table.items():
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict):
                if path not in schema:
                    failures.append(f"{label}: torchtitan has no section [{path}]")
                    continue
                walk(value, path)
            elif prefix not in schema or key not in schema[prefix]:
                failures.append(f"{label}: torchtitan has no key {path}")
    walk(doc, "")
    par = doc.get("parallelism", {})
    c = plan["config"]
    world = (par.get("data_parallel_replicate_degree", 1) * par.get("data_parallel_shard_degree", 1)
             * par.get("tensor_parallel_degree", 1) * par.get("context_parallel_degree", 1)
             * par.get("pipeline_parallel_degree", 1))
    if world != plan["setup"]["gpus"]:
        failures.append(f"{label}: torchtitan degrees multiply to {world}, not the plan's "
                        f"{plan['setup']['gpus']} GPUs")
    if par.get("tensor_parallel_degree") != c["tp"] or par.get("pipeline_parallel_degree") != c["pp"]:
        failures.append(f"{label}: tp/pp differ from the plan's")
    parts = par.get("module_fqns_per_model_part")
    if c["pp"] > 1:
        names = [n for part in (parts or []) for n in part]
        want = (["tok_embeddings"] + [f"layers.{i}" for i in range(sum(plan["stage_layers"]))]
                + ["norm", "output"])
        if names != want or len(parts) != c["pp"] * c["virtual_stages"]:
            failures.append(f"{label}: model parts do not hold every module once in order")


def check_deepspeed(text, plan, keys, failures, label):
    doc = json.loads(text)
    for key, value in doc.items():
        if key not in keys["top_level"]:
            failures.append(f"{label}: DeepSpeed has no top-level key {key}")
        if isinstance(value, dict) and key in keys:
            for sub in value:
                if sub not in keys[key]:
                    failures.append(f"{label}: DeepSpeed has no key {key}.{sub}")
    c = plan["config"]
    if doc["train_batch_size"] != doc["train_micro_batch_size_per_gpu"] * \
            doc["gradient_accumulation_steps"] * c["dp"]:
        failures.append(f"{label}: DeepSpeed batch arithmetic does not hold")
    if doc["zero_optimization"]["stage"] != c["zero"]:
        failures.append(f"{label}: ZeRO stage differs")


CASES = [
    # (label, plan arguments, frameworks that must export it, frameworks that must refuse it)
    ("70b-pp4-megatron", "--model llama3-70b --cluster dgx-h100 --gpus 64 --seq 4096 "
     "--global-batch 256 --stack megatron --pp 4", ["megatron", "torchtitan"], ["deepspeed"]),
    ("70b-torchtitan", "--model llama3-70b --cluster dgx-h100 --gpus 64 --seq 4096 "
     "--global-batch 256 --stack torchtitan", ["megatron", "torchtitan"], ["deepspeed"]),
    ("8b-compile-fp8", "--model llama3-8b --cluster dgx-h100 --gpus 8 --seq 8192 "
     "--global-batch 32 --stack torchtitan-compile --precision fp8", ["torchtitan", "megatron"],
     ["deepspeed"]),
    ("8b-uniform-v2", "--model llama3-8b --cluster dgx-h100 --gpus 16 --seq 4096 "
     "--global-batch 64 --pp 4 --virtual-stages 2 --tp 4 --dp 1", ["megatron", "torchtitan"], []),
    ("8b-fsdp-deepspeed", "--model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4096 "
     "--global-batch 64 --tp 1 --pp 1 --cp 1 --stack deepspeed", ["deepspeed", "torchtitan",
                                                                  "megatron"], []),
    ("8b-zero1", "--model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4096 --global-batch 64 "
     "--tp 1 --pp 1 --cp 1 --zero 1", ["megatron", "deepspeed"], ["torchtitan"]),
    ("mixtral-ep", "--model mixtral-8x7b --cluster dgx-h100 --gpus 64 --seq 4096 "
     "--global-batch 256 --ep 8", ["megatron", "torchtitan"], ["deepspeed"]),
    ("qwen3-partial-recompute", "--model qwen3-8b --cluster dgx-h100 --gpus 8 --seq 8192 "
     "--global-batch 64 --pp 2 --recompute-layers 2", ["megatron"], ["torchtitan"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardplan", required=True)
    args = ap.parse_args()
    megatron, titan, ds = load_schemas()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, plan_args, ok, refused in CASES:
            path = os.path.join(tmp, label + ".json")
            run(args.shardplan, ["plan"] + plan_args.split() + ["--out", path])
            plan = json.load(open(path))
            for fw in ok:
                out = run(args.shardplan, ["export", "--plan", path, "--to", fw]).stdout
                {"megatron": lambda: check_megatron(out, plan, megatron, failures, f"{label}/{fw}"),
                 "torchtitan": lambda: check_titan(out, plan, titan, failures, f"{label}/{fw}"),
                 "deepspeed": lambda: check_deepspeed(out, plan, ds, failures, f"{label}/{fw}"),
                 }[fw]()
            for fw in refused:
                p = run(args.shardplan, ["export", "--plan", path, "--to", fw], expect=2)
                if p.stdout or len(p.stderr.strip().splitlines()) != 1:
                    failures.append(f"{label}/{fw}: a refusal must be one line and no output")
    for f in failures:
        print(f)
    print(f"export_schema: {len(CASES)} plans, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
