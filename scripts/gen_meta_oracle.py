#!/usr/bin/env python3
"""Generate tests/data/meta_ops_oracle.json: PyTorch's own answers for the meta-tensor op set.

Run (needs PyTorch; Debian's python3-torch 1.13 is what the checked-in file was made with):
    /usr/bin/python3 scripts/gen_meta_oracle.py [--out tests/data/meta_ops_oracle.json]
CI never runs this script; tests/tensor/meta_ops_oracle_test.cpp replays the checked-in JSON against
shardplan::tensor.

File format
-----------
{"cases": [ <case>, <case>, ... ],   one case per line, keys sorted, so diffs stay readable
 "generator": "scripts/gen_meta_oracle.py", "torch_version": "1.13.0a0", "format_version": 1}

<case> = {"id": "view/contig_2x3_to_6", "op": "view", "inputs": [<input>...], "args": {...},
          "expect": <expect>, "note": "..." (optional)}

<input> (positional operands, in the order the torch function takes them):
  {"sizes": [2,3], "strides": [3,1], "offset": 0, "dtype": "float32", "storage_numel": 6}
      built as torch.empty(storage_numel, dtype, device='meta').as_strided(sizes, strides, offset),
      so the input is itself a view of a 1-d storage tensor (is_view() is true) and non-contiguous
      layouts, stride-0 (expanded) dims and storage offsets are exact.
  {..., "fresh": true}   a fresh contiguous torch.empty(sizes, dtype): not a view, no
                         storage_numel.
  {"scalar": 2.5} | {"scalar_int": 3} | {"scalar_bool": true} | {"scalar_complex": [re, im]}
      Python numbers (they take part in type promotion as "wrapped numbers").
  {"none": true}   an absent optional tensor (e.g. linear's bias) when a later operand is present.

"args": the non-tensor arguments by torch keyword name (dim, keepdim, size, dtype, ...). dtypes
are torch names without the "torch." prefix (float32, bfloat16, int64, bool, complex64). A JSON
null means None. Memory formats are strings: "preserve_format", "contiguous_format",
"channels_last".

<expect> = {"ok": true, "outputs": [<output>...]}  or  {"ok": false, "error": "<torch's message>"}
<output> = {"sizes", "strides", "offset", "dtype", "contiguous",
            "is_view":      out._is_view(),
            "aliases_input": index of the tensor input whose storage `out` views (out._base is inp,
                             or out._base is inp._base), null when out owns fresh storage,
            "same_object":  out is inputs[aliases_input] (contiguous(), to(same dtype), x.add_(y)),
            "storage_nbytes": bytes of out's storage}
Multi-output ops (chunk, split, unbind, var_mean) list every output in order.
Outputs of "derived" cases carry only sizes and dtype (see below).

Op names are the C++ names in shardplan::tensor; the torch call behind each is in OPS below.
Only the first line of torch's error text is kept (dispatcher errors append a list of backends).

How the expectation is decided
------------------------------
Every case runs on the meta device. Unless the case says cpu_check=False (meta-only behaviour such
as nonzero/item/copy-out, which need data), it also runs on CPU with small real data (floats in
[0.5, 1.5), integers in {1, 2}, bools in {0, 1}: no zero divisors, indices always in range) built
with the same sizes/strides/offset. PyTorch 1.13's meta kernels are sometimes laxer or different
from the real kernels (mm of float32 x float64 passes, softmax of int64 passes, full(.., 1) infers
float32, abs of a transposed tensor comes out contiguous), so:
  - meta and CPU agree                    -> recorded as is;
  - both refuse                           -> CPU's message (meta's is sometimes incidental);
  - CPU refuses with "not implemented for 'Half'/'BFloat16'" (a kernel the 1.13 CPU backend lacks
    but CUDA has)                         -> meta's answer, with a "note";
  - otherwise they differ                 -> CPU's answer (= what a real device does), with
                                             meta's answer kept under "meta_1_13";
  - prefer_meta cases (documented by their "note") keep meta's answer.

Derived cases (scaled_dot_product_attention, rms_norm) have no 1.13 kernel: they are composed
from 1.13 primitives (see compose_sdpa / compose_rms_norm), record only sizes and dtype, and carry
"derived": "composed from 1.13 primitives; later PyTorch behaviour: ...".
float8 dtypes do not exist in 1.13; the C++ tests cover them by hand.
"""

import argparse
import json
import math
import os
import re
import sys
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16,
    "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
    "complex64": torch.complex64, "complex128": torch.complex128,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
MEMORY_FORMATS = {
    "preserve_format": torch.preserve_format, "contiguous_format": torch.contiguous_format,
    "channels_last": torch.channels_last, "channels_last_3d": torch.channels_last_3d,
}


# ---------------------------------------------------------------------------------------------
# Input layouts. Each returns an input spec dict; strides are in elements.

def cstrides(sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(s, 1)
    return list(reversed(strides))


def needed_numel(sizes, strides, offset):
    if any(s == 0 for s in sizes):
        return offset
    return offset + sum((s - 1) * st for s, st in zip(sizes, strides)) + 1


def T(sizes, strides=None, offset=0, dtype="float32", storage_numel=None):
    """A tensor input with an explicit layout (default: contiguous, offset 0, tight storage)."""
    sizes = list(sizes)
    strides = cstrides(sizes) if strides is None else list(strides)
    assert len(sizes) == len(strides)
    if storage_numel is None:
        storage_numel = needed_numel(sizes, strides, offset)
    return {"sizes": sizes, "strides": strides, "offset": offset, "dtype": dtype,
            "storage_numel": storage_numel}


def fresh(sizes, dtype="float32"):
    return {"sizes": list(sizes), "strides": cstrides(sizes), "offset": 0, "dtype": dtype,
            "fresh": True}


def perm_of(base_sizes, perm, dtype="float32", offset=0):
    """contiguous(base_sizes).permute(perm)."""
    st = cstrides(base_sizes)
    return T([base_sizes[p] for p in perm], [st[p] for p in perm], offset, dtype)


def tr(rows, cols, dtype="float32", offset=0):
    """A [rows, cols] tensor that is the transpose of a contiguous [cols, rows] one."""
    return perm_of([cols, rows], [1, 0], dtype, offset)


def stepped(sizes, steps, dtype="float32", offset=0):
    """contiguous(sizes * steps)[::steps] -- non-dense, gaps between elements."""
    big = [s * k for s, k in zip(sizes, steps)]
    st = cstrides(big)
    return T(sizes, [a * k for a, k in zip(st, steps)], offset, dtype,
             storage_numel=offset + (math.prod(big) if big else 1))


def expanded(sizes, base_sizes, dtype="float32"):
    """contiguous(base_sizes).expand(sizes): stride 0 on broadcast dims (base is right-aligned)."""
    pad = len(sizes) - len(base_sizes)
    bst = cstrides(base_sizes)
    strides = []
    for i, s in enumerate(sizes):
        j = i - pad
        strides.append(0 if j < 0 or (base_sizes[j] == 1 and s != 1) else bst[j])
    return T(sizes, strides, 0, dtype, storage_numel=max(1, math.prod(base_sizes)))


def cl(n, c, h, w, dtype="float32"):
    """Channels-last 4-d [n, c, h, w]."""
    return T([n, c, h, w], [h * w * c, 1, w * c, c], 0, dtype)


def S(v):
    if isinstance(v, bool):
        return {"scalar_bool": v}
    if isinstance(v, int):
        return {"scalar_int": v}
    if isinstance(v, complex):
        return {"scalar_complex": [v.real, v.imag]}
    return {"scalar": float(v)}


NONE = {"none": True}


# ---------------------------------------------------------------------------------------------
# Building real/meta inputs.

def cpu_fill(n, dtype):
    g = torch.Generator().manual_seed(n * 7919 + 17)
    if dtype.is_complex:
        re = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
        return torch.complex(re, torch.rand(n, generator=g, dtype=torch.float64)).to(dtype)
    if dtype.is_floating_point:
        return (torch.rand(n, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).to(dtype)
    # {1, 2}: never a zero divisor, always a valid class / embedding row in the corpus.
    return torch.randint(1, 3, (n,), generator=g).to(dtype)


def build(spec, dev):
    if "scalar" in spec:
        return spec["scalar"]
    if "scalar_int" in spec:
        return spec["scalar_int"]
    if "scalar_bool" in spec:
        return spec["scalar_bool"]
    if "scalar_complex" in spec:
        return complex(*spec["scalar_complex"])
    if "none" in spec:
        return None
    dt = DTYPES[spec["dtype"]]
    if spec.get("fresh"):
        n = math.prod(spec["sizes"])
        if dev == "meta":
            return torch.empty(spec["sizes"], dtype=dt, device="meta")
        return cpu_fill(n, dt).reshape(spec["sizes"]).clone()  # owns its storage: not a view
    if dev == "meta":
        storage = torch.empty(spec["storage_numel"], dtype=dt, device="meta")
    else:
        storage = cpu_fill(spec["storage_numel"], dt)
    return storage.as_strided(spec["sizes"], spec["strides"], spec["offset"])


def dt(name):
    return None if name is None else DTYPES[name]


# ---------------------------------------------------------------------------------------------
# Op table: name -> fn(inputs, args, device).

def _factory(fn):
    def run(x, a, dev):
        kw = {"dtype": dt(a.get("dtype")), "device": dev}
        if "memory_format" in a:
            kw["memory_format"] = MEMORY_FORMATS[a["memory_format"]]
        return fn(a["size"], **kw)
    return run


def _full(x, a, dev):
    kw = {"device": dev}
    if a.get("dtype") is not None:
        kw["dtype"] = dt(a["dtype"])
    return torch.full(a["size"], a["fill_value"], **kw)


def _empty_like(x, a, dev):
    kw = {"dtype": dt(a.get("dtype"))}
    if "memory_format" in a:
        kw["memory_format"] = MEMORY_FORMATS[a["memory_format"]]
    return torch.empty_like(x[0], **kw)


def _squeeze(x, a, dev):
    return x[0].squeeze() if a.get("dim") is None else x[0].squeeze(a["dim"])


def _as_strided(x, a, dev):
    return x[0].as_strided(a["size"], a["stride"], a.get("storage_offset"))


def _contiguous(x, a, dev):
    fmt = a.get("memory_format", "contiguous_format")
    return x[0].contiguous(memory_format=MEMORY_FORMATS[fmt])


def _unary(name):
    fn = getattr(torch, name)
    return lambda x, a, dev: fn(x[0])


def _binary(name):
    fn = getattr(torch, name)

    def run(x, a, dev):
        kw = {k: v for k, v in a.items()}
        return fn(x[0], x[1], **kw)
    return run


def _inplace(name):
    def run(x, a, dev):
        return getattr(x[0], name)(x[1], **a)
    return run


def _to(x, a, dev):
    kw = {}
    if "copy" in a:
        kw["copy"] = a["copy"]
    if "device" in a:
        return x[0].to(a["device"], **kw)
    return x[0].to(dt(a["dtype"]), **kw)


def _reduce(name):
    fn = getattr(torch, name)

    def run(x, a, dev):
        kw = {}
        if a.get("dtype") is not None:
            kw["dtype"] = dt(a["dtype"])
        if a.get("dim") is None:
            if a.get("keepdim"):
                raise AssertionError("keepdim without dim is not a torch overload")
            return fn(x[0], **kw)
        return fn(x[0], a["dim"], keepdim=a.get("keepdim", False), **kw)
    return run


def _amax(x, a, dev):
    return torch.amax(x[0], a.get("dim", []), a.get("keepdim", False))


def _argmax(x, a, dev):
    return torch.argmax(x[0], a.get("dim"), a.get("keepdim", False))


def _var(fn):
    def run(x, a, dev):
        kw = {"keepdim": a.get("keepdim", False)}
        if "correction" in a:
            kw["correction"] = a["correction"]
        if "unbiased" in a:
            kw["unbiased"] = a["unbiased"]
        return fn(x[0], a.get("dim"), **kw)
    return run


def _addmm(fn):
    return lambda x, a, dev: fn(x[0], x[1], x[2], beta=a.get("beta", 1), alpha=a.get("alpha", 1))


def _linear(x, a, dev):
    return F.linear(x[0], x[1], x[2] if len(x) > 2 else None)


def _layer_norm(x, a, dev):
    w = x[1] if len(x) > 1 else None
    b = x[2] if len(x) > 2 else None
    return F.layer_norm(x[0], a["normalized_shape"], w, b, a.get("eps", 1e-5))


def _conv1d(x, a, dev):
    b = x[2] if len(x) > 2 else None
    return F.conv1d(x[0], x[1], b, a.get("stride", 1), a.get("padding", 0), a.get("dilation", 1),
                    a.get("groups", 1))


def _softmax(fn):
    return lambda x, a, dev: fn(x[0], a["dim"], dtype=dt(a.get("dtype")))


def _cross_entropy(x, a, dev):
    w = x[2] if len(x) > 2 else None
    return F.cross_entropy(x[0], x[1], weight=w, ignore_index=a.get("ignore_index", -100),
                           reduction=a.get("reduction", "mean"),
                           label_smoothing=a.get("label_smoothing", 0.0))


def compose_sdpa(x, a, dev):
    """scaled_dot_product_attention from 1.13 primitives (later PyTorch's math reference path).

    softmax(q @ k^T * scale + mask) @ v, mask boolean (False = masked out, -inf) or additive, causal
    = lower-triangular [L, S] boolean mask; enable_gqa repeats each k/v head Hq/Hkv times (dim -3).
    """
    q, k, v = x[0], x[1], x[2]
    mask = x[3] if len(x) > 3 else None
    if a.get("is_causal") and mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if not (q.dtype == k.dtype == v.dtype):
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {q.dtype} key.dtype: {k.dtype} and value.dtype: "
                           f"{v.dtype} instead.")
    if a.get("enable_gqa"):
        hq, hk = q.size(-3), k.size(-3)
        if hq % hk != 0 or hk != v.size(-3):
            raise RuntimeError("Number of heads in key and value must divide the number of heads "
                               f"in query (query heads {hq}, key heads {hk}, value heads "
                               f"{v.size(-3)})")
        # repeat_interleave(rep, dim=-3), spelled so that 1.13's meta device can run it.
        def rep(t):
            r = hq // hk
            s = list(t.shape)
            return t.unsqueeze(-3).expand(*s[:-2], r, *s[-2:]).reshape(*s[:-3], hk * r, *s[-2:])
        k, v = rep(k), rep(v)
    scale = a.get("scale")
    if scale is None:
        scale = 1.0 / math.sqrt(q.size(-1))
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    L, S_ = q.size(-2), k.size(-2)
    if a.get("is_causal"):
        mask = torch.ones(L, S_, dtype=torch.bool, device=q.device).tril()
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        else:
            scores = scores + mask
    return torch.matmul(torch.softmax(scores, -1), v)


def compose_rms_norm(x, a, dev):
    """rms_norm from 1.13 primitives (later PyTorch's composite rms_norm).

    y = (float(x) * rsqrt(mean(float(x)^2 over normalized dims) + eps)).type_as(x) [* weight]."""
    inp = x[0]
    w = x[1] if len(x) > 1 else None
    shape = list(a["normalized_shape"])
    # Same shape check (and message) as layer_norm's, which later rms_norm shares.
    F.layer_norm(torch.empty(inp.shape, device="meta"), shape,
                 None if w is None else torch.empty(w.shape, device="meta"))
    up = inp.float() if inp.dtype in (torch.float16, torch.bfloat16) else inp
    dims = list(range(-len(shape), 0))
    eps = a.get("eps")
    if eps is None:
        eps = torch.finfo(up.dtype).eps
    y = (up * torch.rsqrt(up.pow(2).mean(dims, keepdim=True) + eps)).type_as(inp)
    return y * w if w is not None else y


OPS = {
    # factories
    "empty": _factory(torch.empty),
    "empty_strided": lambda x, a, dev: torch.empty_strided(a["size"], a["stride"],
                                                           dtype=dt(a.get("dtype")), device=dev),
    "zeros": _factory(torch.zeros),
    "ones": _factory(torch.ones),
    "full": _full,
    "randn": _factory(torch.randn),
    "empty_like": _empty_like,
    # views
    "view": lambda x, a, dev: x[0].view(a["size"]),
    "reshape": lambda x, a, dev: x[0].reshape(a["size"]),
    "transpose": lambda x, a, dev: x[0].transpose(a["dim0"], a["dim1"]),
    "t": lambda x, a, dev: x[0].t(),
    "permute": lambda x, a, dev: x[0].permute(a["dims"]),
    "expand": lambda x, a, dev: x[0].expand(a["size"]),
    "squeeze": _squeeze,
    "unsqueeze": lambda x, a, dev: x[0].unsqueeze(a["dim"]),
    "flatten": lambda x, a, dev: x[0].flatten(a.get("start_dim", 0), a.get("end_dim", -1)),
    "unflatten": lambda x, a, dev: x[0].unflatten(a["dim"], a["sizes"]),
    "narrow": lambda x, a, dev: x[0].narrow(a["dim"], a["start"], a["length"]),
    "slice": lambda x, a, dev: torch.ops.aten.slice.Tensor(x[0], a.get("dim", 0), a.get("start"),
                                                           a.get("end"), a.get("step", 1)),
    "select": lambda x, a, dev: x[0].select(a["dim"], a["index"]),
    "chunk": lambda x, a, dev: x[0].chunk(a["chunks"], a.get("dim", 0)),
    "split": lambda x, a, dev: x[0].split(a["split_size"], a.get("dim", 0)),
    "unbind": lambda x, a, dev: x[0].unbind(a.get("dim", 0)),
    "as_strided": _as_strided,
    "contiguous": _contiguous,
    "view_as_real": lambda x, a, dev: torch.view_as_real(x[0]),
    # pointwise
    "where": lambda x, a, dev: torch.where(x[0], x[1], x[2]),
    "to": _to,
    # reductions
    "sum": _reduce("sum"),
    "mean": _reduce("mean"),
    "amax": _amax,
    "argmax": _argmax,
    "var": _var(torch.var),
    "var_mean": _var(torch.var_mean),
    # linear algebra
    "matmul": lambda x, a, dev: torch.matmul(x[0], x[1]),
    "mm": lambda x, a, dev: torch.mm(x[0], x[1]),
    "bmm": lambda x, a, dev: torch.bmm(x[0], x[1]),
    "addmm": _addmm(torch.addmm),
    "baddbmm": _addmm(torch.baddbmm),
    "linear": _linear,
    # joining
    "cat": lambda x, a, dev: torch.cat(x, a.get("dim", 0)),
    "stack": lambda x, a, dev: torch.stack(x, a.get("dim", 0)),
    # nn
    "embedding": lambda x, a, dev: F.embedding(x[0], x[1], padding_idx=a.get("padding_idx")),
    "layer_norm": _layer_norm,
    "conv1d": _conv1d,
    "softmax": _softmax(torch.softmax),
    "log_softmax": _softmax(torch.log_softmax),
    "gelu": lambda x, a, dev: F.gelu(x[0], approximate=a.get("approximate", "none")),
    "silu": lambda x, a, dev: F.silu(x[0]),
    "dropout": lambda x, a, dev: F.dropout(x[0], a.get("p", 0.5), a.get("train", True)),
    "cross_entropy": _cross_entropy,
    "scaled_dot_product_attention": compose_sdpa,
    "rms_norm": compose_rms_norm,
    # data-dependent / copy-out: meta must refuse
    "nonzero": lambda x, a, dev: x[0].nonzero(),
    "item": lambda x, a, dev: x[0].item(),
    "index_mask": lambda x, a, dev: x[0][x[1]],
    "cpu": lambda x, a, dev: x[0].cpu(),
}
UNARY = ["neg", "exp", "log", "abs", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "sin", "cos",
         "reciprocal", "logical_not"]
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum",
          "eq", "ne", "lt", "le", "gt", "ge"]
INPLACE = ["add_", "sub_", "mul_", "div_"]
for _n in UNARY:
    OPS[_n] = _unary(_n)
for _n in BINARY:
    OPS[_n] = _binary(_n)
for _n in INPLACE:
    OPS[_n] = _inplace(_n)

DERIVED_NOTES = {
    "scaled_dot_product_attention":
        "composed from 1.13 primitives; later PyTorch behaviour: "
        "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p=0, "
        "is_causal, scale, enable_gqa) returns [..., L, Ev] in q's dtype; enable_gqa repeats k/v "
        "heads Hq/Hkv times; attn_mask together with is_causal is an error",
    "rms_norm":
        "composed from 1.13 primitives; later PyTorch behaviour: "
        "torch.nn.functional.rms_norm(x, normalized_shape, weight, eps) = "
        "(x * rsqrt(mean(x^2) + eps)).type_as(x) * weight, computed in float for half inputs; "
        "output dtype = promote(x.dtype, weight.dtype)",
}


# ---------------------------------------------------------------------------------------------
# Running one case.

def first_line(e):
    msg = str(e).strip()
    return msg.splitlines()[0] if msg else type(e).__name__


def describe(out, inputs, derived):
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    res = []
    for o in outs:
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"op returned a non-tensor {type(o).__name__}")
        d = {"sizes": list(o.shape), "dtype": DTYPE_NAMES[o.dtype]}
        if not derived:
            alias, same = None, False
            base = o._base
            for i, inp in enumerate(inputs):
                if not isinstance(inp, torch.Tensor):
                    continue
                if o is inp:
                    alias, same = i, True
                    break
                if base is not None and (base is inp or base is inp._base):
                    alias = i
                    break
            d.update({"strides": list(o.stride()), "offset": o.storage_offset(),
                      "contiguous": o.is_contiguous(), "is_view": o._is_view(),
                      "aliases_input": alias, "same_object": same,
                      "storage_nbytes": o.storage().nbytes()})
        res.append(d)
    return res


def run_on(case, dev):
    inputs = [build(s, dev) for s in case["inputs"]]
    try:
        out = OPS[case["op"]](inputs, case["args"], dev)
        return {"ok": True, "outputs": describe(out, inputs, case["op"] in DERIVED_NOTES)}
    except (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError) as e:
        return {"ok": False, "error": first_line(e)}


def comparable(expect):
    """What must agree between meta and CPU: ok-ness and the layout (storage size may differ)."""
    if not expect["ok"]:
        return False
    return [{k: v for k, v in o.items() if k != "storage_nbytes"} for o in expect["outputs"]]


# 1.13's CPU backend lacks some half-precision kernels that CUDA has ("log_vml_cpu" not implemented
# for 'Half'): a gap of that backend, not an error of the op, so meta's answer stands.
CPU_GAP = re.compile(r"not implemented for '(Half|BFloat16)'")


def evaluate(case):
    """-> (expectation to record, meta's differing answer or None, CPU gap message or None)."""
    meta = run_on(case, "meta")
    if not case["_cpu_check"]:
        return meta, None, None
    cpu = run_on(case, "cpu")
    if not meta["ok"] and not cpu["ok"]:
        # Both refuse: keep the real kernels' wording (1.13's meta registrations sometimes fail
        # with an incidental Python error such as "tuple index out of range").
        return cpu, None, None
    if comparable(meta) == comparable(cpu):
        return meta, None, None
    if not cpu["ok"] and CPU_GAP.search(cpu["error"]):
        return meta, None, cpu["error"]
    if case["_prefer_meta"]:
        return meta, None, None
    return cpu, meta, None


# ---------------------------------------------------------------------------------------------
# The corpus.

CASES = []


def case(cid, op, inputs, args=None, cpu_check=True, note=None, prefer_meta=False):
    """cpu_check=False: meta-only behaviour; prefer_meta: record meta even if CPU differs."""
    assert op in OPS, op
    CASES.append({"id": f"{op}/{cid}", "op": op, "inputs": inputs, "args": args or {},
                  "_cpu_check": cpu_check, "_note": note, "_prefer_meta": prefer_meta})


def corpus_factories():
    for dtn in ["float32", "bfloat16", "int64", "bool"]:
        case(f"2x3_{dtn}", "empty", [], {"size": [2, 3], "dtype": dtn})
    case("default_dtype_4", "empty", [], {"size": [4]})
    case("0dim", "empty", [], {"size": []})
    case("zero_size_0x5", "empty", [], {"size": [0, 5]})
    case("channels_last_2x3x4x5", "empty", [], {"size": [2, 3, 4, 5],
                                                "memory_format": "channels_last"})
    case("channels_last_on_3d_err", "empty", [], {"size": [2, 3, 4],
                                                  "memory_format": "channels_last"})
    case("negative_size_err", "empty", [], {"size": [2, -1]})

    case("transposed_3x4", "empty_strided", [], {"size": [3, 4], "stride": [1, 3]})
    case("gappy_2x3", "empty_strided", [], {"size": [2, 3], "stride": [10, 2]})
    case("stride0_4x5", "empty_strided", [], {"size": [4, 5], "stride": [0, 1]})
    case("zero_size", "empty_strided", [], {"size": [0, 3], "stride": [3, 1]})
    case("0dim_f16", "empty_strided", [], {"size": [], "stride": [], "dtype": "float16"})
    case("len_mismatch_err", "empty_strided", [], {"size": [2, 3], "stride": [1]})
    case("negative_size_err", "empty_strided", [], {"size": [-2], "stride": [1]})

    for op in ["zeros", "ones"]:
        case("2x3", op, [], {"size": [2, 3]})
        case("int32_4", op, [], {"size": [4], "dtype": "int32"})
        case("0dim_bool", op, [], {"size": [], "dtype": "bool"})
        case("zero_size_3x0", op, [], {"size": [3, 0], "dtype": "float64"})
        case("negative_size_err", op, [], {"size": [-1]})

    case("float_fill", "full", [], {"size": [2, 3], "fill_value": 1.5})
    case("int_fill_infers_int64", "full", [], {"size": [2], "fill_value": 7})
    case("bool_fill_infers_bool", "full", [], {"size": [3], "fill_value": True})
    case("explicit_complex64", "full", [], {"size": [3], "fill_value": 2.0, "dtype": "complex64"})
    case("explicit_bf16", "full", [], {"size": [4, 1], "fill_value": 2, "dtype": "bfloat16"})
    case("0dim", "full", [], {"size": [], "fill_value": 0.0})
    case("negative_size_err", "full", [], {"size": [-3], "fill_value": 1.0})

    case("3x4", "randn", [], {"size": [3, 4]})
    case("f16_2x2x2", "randn", [], {"size": [2, 2, 2], "dtype": "float16"})
    case("complex64_3", "randn", [], {"size": [3], "dtype": "complex64"})
    case("zero_size", "randn", [], {"size": [0]})
    case("int64_err", "randn", [], {"size": [3], "dtype": "int64"})
    case("negative_size_err", "randn", [], {"size": [-1, 2]})

    el = "empty_like"
    case("contig", el, [T([2, 3])])
    case("transposed_preserves_strides", el, [tr(3, 4)])
    case("permuted_3d_preserves", el, [perm_of([2, 3, 4], [2, 0, 1])])
    case("channels_last_preserved", el, [cl(2, 3, 4, 5)])
    case("stepped_nondense_goes_contig", el, [stepped([3, 4], [2, 2])])
    case("stepped_transposed_nondense", el, [T([4, 3], [2, 8])])
    case("expanded_goes_contig", el, [expanded([3, 4], [4])])
    case("offset_input", el, [T([2, 2], offset=5)])
    case("dtype_override", el, [tr(3, 4)], {"dtype": "int32"})
    case("force_contiguous", el, [tr(3, 4)], {"memory_format": "contiguous_format"})
    case("force_channels_last", el, [T([2, 3, 4, 5])], {"memory_format": "channels_last"})
    case("0dim", el, [T([])])
    case("zero_size_permuted", el, [perm_of([0, 3], [1, 0])])
    case("channels_last_on_2d_err", el, [T([2, 3])], {"memory_format": "channels_last"})


def corpus_views():
    case("contig_2x3_to_6", "view", [T([2, 3])], {"size": [6]})
    case("infer_minus1", "view", [T([2, 3, 4])], {"size": [-1, 4]})
    case("split_dim", "view", [T([6, 4])], {"size": [2, 3, 4]})
    case("0dim_to_1", "view", [T([])], {"size": [1]})
    case("1_to_0dim", "view", [T([1])], {"size": []})
    case("zero_size", "view", [T([0, 4])], {"size": [4, 0]})
    case("offset_kept", "view", [T([2, 6], offset=3)], {"size": [3, 4]})
    case("transposed_merge_ok", "view", [perm_of([2, 3, 4], [0, 2, 1])], {"size": [2, 4, 3]})
    case("transposed_split_ok", "view", [tr(6, 4)], {"size": [2, 3, 4]})
    case("stepped_inner_keeps_step", "view", [stepped([4, 3], [1, 2])], {"size": [2, 2, 3]})
    case("expanded_split", "view", [expanded([4, 6], [6])], {"size": [2, 2, 6]})
    case("expanded_merge_err", "view", [expanded([4, 6], [6])], {"size": [24]})
    case("transposed_flatten_err", "view", [tr(3, 4)], {"size": [12]})
    case("size_mismatch_err", "view", [T([2, 3])], {"size": [4]})
    case("two_minus1_err", "view", [T([2, 3])], {"size": [-1, -1]})
    case("zero_size_ambiguous_err", "view", [T([0, 3])], {"size": [-1, 0]})

    case("contig_is_view", "reshape", [T([2, 3])], {"size": [3, 2]})
    case("fresh_input_view", "reshape", [fresh([4, 3])], {"size": [12]})
    case("transposed_copies", "reshape", [tr(3, 4)], {"size": [12]})
    case("transposed_compatible_view", "reshape", [perm_of([2, 3, 4], [1, 0, 2])],
         {"size": [3, 2, 2, 2]})
    case("stepped_copies", "reshape", [stepped([4, 3], [2, 1])], {"size": [12]})
    case("expanded_copies", "reshape", [expanded([3, 4], [4])], {"size": [12]})
    case("infer", "reshape", [T([2, 3, 4], offset=2)], {"size": [4, -1]})
    case("0dim_to_1x1", "reshape", [T([])], {"size": [1, 1]})
    case("zero_size", "reshape", [T([3, 0])], {"size": [0, 5]})
    case("size_mismatch_err", "reshape", [T([2, 3])], {"size": [5]})
    case("two_minus1_err", "reshape", [T([2, 3])], {"size": [-1, 3, -1]})

    case("2d", "transpose", [T([2, 3])], {"dim0": 0, "dim1": 1})
    case("3d_neg_dims", "transpose", [T([2, 3, 4], offset=1)], {"dim0": -1, "dim1": 0})
    case("same_dim", "transpose", [T([2, 3])], {"dim0": 1, "dim1": 1})
    case("expanded", "transpose", [expanded([3, 4], [4])], {"dim0": 0, "dim1": 1})
    case("0dim_0_0", "transpose", [T([])], {"dim0": 0, "dim1": -1})
    case("dim_out_of_range_err", "transpose", [T([2, 3])], {"dim0": 0, "dim1": 2})

    case("2d", "t", [T([2, 3])])
    case("1d", "t", [T([5])])
    case("0dim", "t", [T([])])
    case("stepped", "t", [stepped([3, 2], [2, 3])])
    case("3d_err", "t", [T([2, 3, 4])])

    case("3d", "permute", [T([2, 3, 4])], {"dims": [2, 0, 1]})
    case("neg_dims", "permute", [T([2, 3, 4])], {"dims": [-1, -3, -2]})
    case("of_permuted", "permute", [perm_of([2, 3, 4], [1, 2, 0])], {"dims": [2, 0, 1]})
    case("4d_to_channels_last", "permute", [T([2, 4, 5, 3])], {"dims": [0, 3, 1, 2]})
    case("0dim_empty", "permute", [T([])], {"dims": []})
    case("repeated_dim_err", "permute", [T([2, 3])], {"dims": [0, 0]})
    case("wrong_len_err", "permute", [T([2, 3])], {"dims": [0]})
    case("out_of_range_err", "permute", [T([2, 3])], {"dims": [0, 2]})

    case("row_to_matrix", "expand", [T([1, 4])], {"size": [3, 4]})
    case("new_leading_dims", "expand", [T([4])], {"size": [2, 3, 4]})
    case("minus1_keeps", "expand", [T([3, 1])], {"size": [-1, 5]})
    case("0dim_to_2x2", "expand", [T([])], {"size": [2, 2]})
    case("to_zero", "expand", [T([1, 3])], {"size": [0, 3]})
    case("of_transposed", "expand", [tr(1, 3)], {"size": [2, 4, 3]})
    case("offset_kept", "expand", [T([1, 2], offset=4)], {"size": [3, 2]})
    case("non_singleton_err", "expand", [T([2, 3])], {"size": [4, 3]})
    case("fewer_dims_err", "expand", [T([2, 3])], {"size": [3]})
    case("minus1_new_dim_err", "expand", [T([3])], {"size": [-1, 3]})

    case("all", "squeeze", [T([1, 3, 1, 2])])
    case("all_none_left", "squeeze", [T([1, 1])])
    case("dim_singleton", "squeeze", [T([2, 1, 3])], {"dim": 1})
    case("dim_not_singleton_noop", "squeeze", [T([2, 1, 3])], {"dim": 0})
    case("neg_dim", "squeeze", [tr(1, 4)], {"dim": -2})
    case("expanded", "squeeze", [expanded([3, 1, 4], [1, 4])])
    case("0dim", "squeeze", [T([])])
    case("0dim_dim0", "squeeze", [T([])], {"dim": 0})
    case("dim_out_of_range_err", "squeeze", [T([2, 1])], {"dim": 2})

    case("front", "unsqueeze", [T([2, 3])], {"dim": 0})
    case("back", "unsqueeze", [T([2, 3])], {"dim": 2})
    case("neg_back", "unsqueeze", [T([2, 3])], {"dim": -1})
    case("middle_transposed", "unsqueeze", [tr(2, 3)], {"dim": 1})
    case("stepped_last", "unsqueeze", [stepped([3, 2], [1, 2])], {"dim": 2})
    case("0dim", "unsqueeze", [T([])], {"dim": 0})
    case("zero_size", "unsqueeze", [T([0, 2])], {"dim": 1})
    case("dim_out_of_range_err", "unsqueeze", [T([2, 3])], {"dim": 3})
    case("neg_out_of_range_err", "unsqueeze", [T([2, 3])], {"dim": -4})

    case("all", "flatten", [T([2, 3, 4])])
    case("range_1_2", "flatten", [T([2, 3, 4, 5])], {"start_dim": 1, "end_dim": 2})
    case("neg_range", "flatten", [T([2, 3, 4, 5])], {"start_dim": -3, "end_dim": -2})
    case("single_dim_noop", "flatten", [T([2, 3])], {"start_dim": 1, "end_dim": 1})
    case("0dim_to_1", "flatten", [T([])])
    case("1d_noop", "flatten", [T([5])])
    case("transposed_copies", "flatten", [tr(3, 4)])
    case("partial_viewable", "flatten", [perm_of([2, 3, 4], [2, 0, 1])],
         {"start_dim": 1, "end_dim": 2})
    case("start_after_end_err", "flatten", [T([2, 3, 4])], {"start_dim": 2, "end_dim": 1})
    case("dim_out_of_range_err", "flatten", [T([2, 3])], {"start_dim": 0, "end_dim": 2})

    case("last", "unflatten", [T([2, 12])], {"dim": 1, "sizes": [3, 4]})
    case("infer", "unflatten", [T([12, 2])], {"dim": 0, "sizes": [-1, 3]})
    case("neg_dim_transposed", "unflatten", [tr(6, 2)], {"dim": -2, "sizes": [2, 3]})
    case("product_mismatch_err", "unflatten", [T([2, 12])], {"dim": 1, "sizes": [5, 2]})
    case("dim_out_of_range_err", "unflatten", [T([6])], {"dim": 1, "sizes": [2, 3]})

    case("dim0", "narrow", [T([5, 3])], {"dim": 0, "start": 1, "length": 3})
    case("dim1_offset_input", "narrow", [T([5, 3], offset=2)], {"dim": 1, "start": 1, "length": 2})
    case("neg_start", "narrow", [T([6])], {"dim": 0, "start": -2, "length": 2})
    case("zero_length", "narrow", [T([4, 4])], {"dim": 1, "start": 4, "length": 0})
    case("transposed", "narrow", [tr(4, 6)], {"dim": 1, "start": 2, "length": 3})
    case("past_end_err", "narrow", [T([5])], {"dim": 0, "start": 3, "length": 3})
    case("0dim_err", "narrow", [T([])], {"dim": 0, "start": 0, "length": 1})
    case("dim_out_of_range_err", "narrow", [T([5])], {"dim": 1, "start": 0, "length": 1})

    case("basic_1_4", "slice", [T([6, 3])], {"dim": 0, "start": 1, "end": 4})
    case("step3", "slice", [T([10, 4])], {"dim": 0, "start": 1, "end": 9, "step": 3})
    case("dim1_step2", "slice", [T([4, 7])], {"dim": 1, "start": 0, "end": 7, "step": 2})
    case("none_bounds", "slice", [T([5])], {"dim": 0, "start": None, "end": None, "step": 2})
    case("neg_start", "slice", [T([8])], {"dim": 0, "start": -3, "end": None})
    case("neg_end", "slice", [T([8])], {"dim": 0, "start": 0, "end": -2})
    case("end_clamped", "slice", [T([5])], {"dim": 0, "start": 2, "end": 100})
    case("start_past_end_empty", "slice", [T([5])], {"dim": 0, "start": 4, "end": 2})
    case("start_clamped_neg", "slice", [T([5])], {"dim": 0, "start": -100, "end": 2})
    case("of_transposed_offset", "slice", [tr(6, 4, offset=3)],
         {"dim": 1, "start": 1, "end": 4, "step": 2})
    case("of_expanded", "slice", [expanded([6, 4], [4])], {"dim": 0, "start": 1, "end": 5,
                                                           "step": 2})
    case("zero_size_input", "slice", [T([0, 3])], {"dim": 0, "start": 0, "end": 2})
    case("step0_err", "slice", [T([5])], {"dim": 0, "start": 0, "end": 5, "step": 0})
    case("neg_step_err", "slice", [T([5])], {"dim": 0, "start": 0, "end": 5, "step": -1})
    case("0dim_err", "slice", [T([])], {"dim": 0, "start": 0, "end": 1})

    case("row", "select", [T([3, 4])], {"dim": 0, "index": 1})
    case("col_neg_index", "select", [T([3, 4])], {"dim": 1, "index": -1})
    case("transposed_offset", "select", [tr(3, 4, offset=2)], {"dim": 1, "index": 2})
    case("expanded_dim", "select", [expanded([3, 4], [4])], {"dim": 0, "index": 2})
    case("1d_to_0dim", "select", [T([5])], {"dim": 0, "index": 4})
    case("index_out_of_range_err", "select", [T([3, 4])], {"dim": 0, "index": 3})
    case("neg_index_out_of_range_err", "select", [T([3, 4])], {"dim": 1, "index": -5})
    case("0dim_err", "select", [T([])], {"dim": 0, "index": 0})

    case("even", "chunk", [T([6, 2])], {"chunks": 3, "dim": 0})
    case("uneven_7_by_3", "chunk", [T([7])], {"chunks": 3})
    case("fewer_than_asked_5_by_4", "chunk", [T([5])], {"chunks": 4})
    case("more_chunks_than_size", "chunk", [T([2, 3])], {"chunks": 5, "dim": 0})
    case("dim1_transposed", "chunk", [tr(4, 6)], {"chunks": 2, "dim": 1})
    case("zero_size_dim", "chunk", [T([0, 3])], {"chunks": 2, "dim": 0})
    case("zero_chunks_err", "chunk", [T([4])], {"chunks": 0})
    case("0dim_err", "chunk", [T([])], {"chunks": 1})

    case("int_even", "split", [T([6, 2])], {"split_size": 2})
    case("int_uneven", "split", [T([7, 2])], {"split_size": 3})
    case("int_dim1_offset", "split", [T([2, 5], offset=1)], {"split_size": 2, "dim": 1})
    case("int_larger_than_dim", "split", [T([3])], {"split_size": 10})
    case("list", "split", [T([6, 4])], {"split_size": [1, 2, 3]})
    case("list_with_zero", "split", [T([4, 3])], {"split_size": [2, 0, 2], "dim": 0})
    case("list_neg_dim_transposed", "split", [tr(3, 5)], {"split_size": [3, 2], "dim": -1})
    case("list_sum_mismatch_err", "split", [T([6])], {"split_size": [2, 2]})
    case("int_negative_err", "split", [T([6])], {"split_size": -1})
    case("0dim_err", "split", [T([])], {"split_size": 1})

    case("dim0", "unbind", [T([3, 2])])
    case("dim1_offset", "unbind", [T([2, 3], offset=4)], {"dim": 1})
    case("neg_dim_permuted", "unbind", [perm_of([2, 3, 4], [2, 0, 1])], {"dim": -1})
    case("zero_size_dim", "unbind", [T([0, 3])], {"dim": 0})
    case("0dim_err", "unbind", [T([])])
    case("dim_out_of_range_err", "unbind", [T([2])], {"dim": 1})

    case("window", "as_strided", [T([10])], {"size": [3, 4], "stride": [2, 1]})
    case("with_offset", "as_strided", [T([10])], {"size": [2, 2], "stride": [1, 2],
                                                   "storage_offset": 3})
    case("keeps_input_offset", "as_strided", [T([4], offset=3, storage_numel=12)],
         {"size": [2, 2], "stride": [2, 1]})
    case("stride0", "as_strided", [T([4])], {"size": [3, 4], "stride": [0, 1]})
    case("zero_size", "as_strided", [T([4])], {"size": [0, 100], "stride": [100, 1]})
    case("0dim", "as_strided", [T([4])], {"size": [], "stride": [], "storage_offset": 3})
    case("out_of_bounds_err", "as_strided", [T([6])], {"size": [4], "stride": [2]})
    case("neg_stride_err", "as_strided", [T([6])], {"size": [2], "stride": [-1],
                                                     "storage_offset": 2})
    case("len_mismatch_err", "as_strided", [T([6])], {"size": [2, 3], "stride": [1]})

    case("already_contig_is_self", "contiguous", [T([2, 3])])
    case("fresh_is_self", "contiguous", [fresh([2, 3])])
    case("offset_contig_is_self", "contiguous", [T([2, 3], offset=5)])
    case("transposed_copies", "contiguous", [tr(3, 4)])
    case("stepped_copies", "contiguous", [stepped([2, 3], [2, 2])])
    case("expanded_copies", "contiguous", [expanded([3, 4], [1, 4])])
    case("size1_dims_any_stride_is_self", "contiguous", [T([1, 4, 1], [99, 1, 7])])
    case("zero_size_is_self", "contiguous", [T([0, 3], [1, 5])])
    case("0dim_is_self", "contiguous", [T([])])
    case("to_channels_last", "contiguous", [T([2, 3, 4, 5])], {"memory_format": "channels_last"})
    case("channels_last_is_self", "contiguous", [cl(2, 3, 4, 5)],
         {"memory_format": "channels_last"})
    case("channels_last_3d_err", "contiguous", [T([2, 3, 4])], {"memory_format": "channels_last"})

    case("complex64_1d", "view_as_real", [T([3], dtype="complex64")])
    case("complex128_2d_offset", "view_as_real", [T([2, 3], offset=1, dtype="complex128")])
    case("transposed", "view_as_real", [tr(2, 3, dtype="complex64")])
    case("0dim", "view_as_real", [T([], dtype="complex64")])
    case("float_err", "view_as_real", [T([3])])
    case("int_err", "view_as_real", [T([3], dtype="int64")])


def corpus_pointwise():
    layouts = {
        "contig": lambda d: T([2, 3], dtype=d),
        "transposed": lambda d: tr(2, 3, dtype=d),
        "stepped": lambda d: stepped([2, 3], [2, 2], dtype=d),
        "expanded": lambda d: expanded([2, 3], [3], dtype=d),
        "permuted3d": lambda d: perm_of([2, 3, 4], [2, 0, 1], dtype=d),
        "channels_last": lambda d: cl(2, 3, 2, 2, dtype=d),
        "offset": lambda d: T([4], offset=3, dtype=d),
        "0dim": lambda d: T([], dtype=d),
        "zero_size": lambda d: T([0, 3], dtype=d),
    }
    # Every unary op on float32 in a few layouts, plus dtype behaviour.
    for op in UNARY:
        for lname in ["contig", "transposed"]:
            case(f"float32_{lname}", op, [layouts[lname]("float32")])
    more = {
        "neg": [("stepped", "float32"), ("expanded", "float16"), ("0dim", "int64"),
                ("channels_last", "bfloat16"), ("zero_size", "int8"), ("contig", "bool")],
        "exp": [("contig", "int64"), ("contig", "bool"), ("permuted3d", "float64"),
                ("offset", "complex64"), ("0dim", "int32")],
        "log": [("contig", "uint8"), ("zero_size", "float16")],
        "abs": [("contig", "int32"), ("contig", "complex64"), ("expanded", "float32"),
                ("contig", "bool")],
        "sqrt": [("contig", "int64"), ("stepped", "bool"), ("0dim", "float64"),
                 ("channels_last", "float32")],
        "rsqrt": [("contig", "int32")],
        "sigmoid": [("contig", "int64"), ("permuted3d", "bfloat16"), ("expanded", "float32")],
        "tanh": [("contig", "int16"), ("offset", "float16")],
        "relu": [("contig", "int64"), ("contig", "bool"), ("contig", "complex64"),
                 ("channels_last", "float32"),
                 ("stepped", "float16")],
        "sin": [("contig", "bool")],
        "cos": [("expanded", "int64")],
        "reciprocal": [("contig", "int64")],
        "logical_not": [("contig", "bool"), ("contig", "int64"), ("permuted3d", "float32")],
    }
    BAD_UNARY = {("neg", "bool"), ("abs", "bool"), ("relu", "bool"), ("relu", "complex64")}
    for op, lst in more.items():
        for lname, d in lst:
            case(f"{d}_{lname}" + ("_err" if (op, d) in BAD_UNARY else ""), op, [layouts[lname](d)])

    # Binary: layouts and broadcasting (output strides follow TensorIterator's ordering).
    shapes = [
        ("contig_contig", T([2, 3]), T([2, 3])),
        ("transposed_transposed", tr(3, 4), tr(3, 4)),
        ("transposed_contig", tr(3, 4), T([3, 4])),
        ("contig_transposed", T([3, 4]), tr(3, 4)),
        ("permuted3d_both", perm_of([2, 3, 4], [2, 0, 1]), perm_of([2, 3, 4], [2, 0, 1])),
        ("permuted3d_contig", perm_of([2, 3, 4], [1, 2, 0]), T([3, 4, 2])),
        ("permuted4d_both", perm_of([2, 3, 4, 5], [0, 2, 3, 1]),
         perm_of([2, 3, 4, 5], [0, 2, 3, 1])),
        ("channels_last_both", cl(2, 3, 4, 5), cl(2, 3, 4, 5)),
        ("channels_last_contig", cl(2, 3, 4, 5), T([2, 3, 4, 5])),
        ("contig_channels_last", T([2, 3, 4, 5]), cl(2, 3, 4, 5)),
        ("channels_last_bcast_bias", cl(2, 3, 4, 5), T([3, 1, 1])),
        ("bcast_row", T([4, 3]), T([3])),
        ("bcast_col", T([4, 1]), T([1, 3])),
        ("bcast_rank", T([2, 1, 4]), T([3, 1])),
        ("expanded_contig", expanded([3, 4], [4]), T([3, 4])),
        ("expanded_transposed", expanded([3, 4], [3, 1]), tr(3, 4)),
        ("transposed_bcast_row", tr(3, 4), T([4])),
        ("stepped_contig", stepped([3, 4], [2, 1]), T([3, 4])),
        ("stepped_transposed", T([3, 4], [1, 6], storage_numel=24), tr(3, 4)),
        ("offset_both", T([2, 2], offset=3), T([2, 2], offset=1)),
        ("0dim_0dim", T([]), T([])),
        ("0dim_2d", T([]), T([2, 3])),
        ("2d_0dim_transposed", tr(2, 3), T([])),
        ("zero_size_bcast", T([0, 3]), T([1, 3])),
        ("zero_size_with_1", T([2, 0]), T([2, 1])),
        ("size1_dims_odd_strides", T([1, 4], [1, 1]), T([3, 1], [1, 1])),
    ]
    for name, a, b in shapes:
        case(name, "add", [a, b])
    for name, a, b in shapes[:12]:
        case(name, "mul", [a, b])
    case("bcast_mismatch_err", "add", [T([2, 3]), T([3, 2])])
    case("bcast_rank_mismatch_err", "mul", [T([4, 3]), T([2, 4, 2])])
    case("zero_vs_2_err", "add", [T([0, 3]), T([2, 3])])

    # Type promotion (each with contiguous [3] / 0-dim / scalars).
    def v(d):
        return T([3], dtype=d)

    def z(d):
        return T([], dtype=d)
    promo = [
        ("int32_plus_float_scalar", v("int32"), S(2.5)),
        ("int64_plus_int_scalar", v("int64"), S(2)),
        ("int8_plus_int_scalar_stays_int8", v("int8"), S(1000)),
        ("uint8_plus_neg_int_scalar", v("uint8"), S(-1)),
        ("bool_plus_int_scalar", v("bool"), S(3)),
        ("bool_plus_bool_scalar", v("bool"), S(True)),
        ("bool_plus_float_scalar", v("bool"), S(1.5)),
        ("float16_plus_float_scalar", v("float16"), S(2.5)),
        ("int_plus_complex_scalar", v("int32"), S(1 + 2j)),
        ("float64_plus_complex_scalar", v("float64"), S(1j)),
        ("float16_plus_0dim_float64", v("float16"), z("float64")),
        ("int8_plus_0dim_float64", v("int8"), z("float64")),
        ("int32_plus_0dim_int64", v("int32"), z("int64")),
        ("uint8_plus_0dim_int8", v("uint8"), z("int8")),
        ("int32_plus_0dim_complex128", v("int32"), z("complex128")),
        ("float32_plus_0dim_complex128", v("float32"), z("complex128")),
        ("0dim_f64_plus_0dim_i32", z("float64"), z("int32")),
        ("0dim_int_plus_float_scalar", z("int64"), S(2.5)),
        ("uint8_plus_int8", v("uint8"), v("int8")),
        ("int8_plus_int16", v("int8"), v("int16")),
        ("bf16_plus_fp16", v("bfloat16"), v("float16")),
        ("bf16_plus_float32", v("bfloat16"), v("float32")),
        ("complex64_plus_float64", v("complex64"), v("float64")),
        ("int64_plus_float16", v("int64"), v("float16")),
        ("bool_plus_bool", v("bool"), v("bool")),
        ("bool_plus_uint8", v("bool"), v("uint8")),
        ("int32_plus_float64_bcast", T([2, 3], dtype="int32"), v("float64")),
    ]
    for name, a, b in promo:
        case(name, "add", [a, b])
    case("alpha_int", "add", [v("int64"), v("int64")], {"alpha": 2})
    case("alpha_float_on_int_err", "add", [v("int64"), v("int64")], {"alpha": 2.5})
    case("alpha_float", "add", [v("float32"), v("float16")], {"alpha": 0.5})

    for name, a, b in [("float_float", v("float32"), v("float32")),
                       ("int_float_scalar", v("int32"), S(1.5)),
                       ("bf16_0dim_f32", v("bfloat16"), z("float32")),
                       ("bcast_transposed", tr(3, 4), T([3, 1])),
                       ("uint8_int8", v("uint8"), v("int8"))]:
        case(name, "sub", [a, b])
    case("alpha", "sub", [v("float32"), v("float32")], {"alpha": 3})
    case("bool_bool_err", "sub", [v("bool"), v("bool")])
    case("bool_scalar_bool_err", "sub", [v("bool"), S(True)])
    case("bool_minus_int_err", "sub", [v("bool"), v("int32")])
    case("int_minus_bool_err", "sub", [v("int32"), v("bool")])
    case("bcast_err", "sub", [T([2]), T([3])])

    for name, a, b in [("int_int_promotes_float", v("int64"), v("int64")),
                       ("int_int_scalar_float", v("int32"), S(2)),
                       ("bool_bool", v("bool"), v("bool")),
                       ("float16_int", v("float16"), v("int64")),
                       ("float64_float32", v("float64"), v("float32")),
                       ("bf16_0dim_float64", v("bfloat16"), z("float64")),
                       ("complex_int", v("complex64"), v("int64")),
                       ("permuted_bcast", perm_of([2, 3, 4], [2, 1, 0]), T([2])),
                       ("0dim_int_0dim_int", z("int32"), z("int32"))]:
        case(name, "div", [a, b])
    case("floor_int_stays_int", "div", [v("int64"), v("int32")], {"rounding_mode": "floor"})
    case("trunc_float", "div", [v("float32"), S(3)], {"rounding_mode": "trunc"})
    case("bad_rounding_mode_err", "div", [v("float32"), v("float32")], {"rounding_mode": "up"})
    case("bcast_err", "div", [T([2, 2]), T([3])])

    for name, a, b in [("float_float", v("float32"), v("float32")),
                       ("int_int_scalar", v("int64"), S(2)),
                       ("int_float_scalar", v("int32"), S(0.5)),
                       ("float16_int_tensor", v("float16"), v("int64")),
                       ("int_tensor_int_tensor", v("int32"), v("int64")),
                       ("bcast_transposed", tr(2, 3), T([1, 3])),
                       ("0dim_base", z("float32"), T([2, 2]))]:
        case(name, "pow", [a, b])
    case("int_neg_int_scalar_err", "pow", [v("int64"), S(-1)])
    case("bcast_err", "pow", [T([2]), T([4])])

    for op in ["maximum", "minimum"]:
        case("float_float", op, [v("float32"), v("float32")])
        case("int_float16", op, [v("int64"), v("float16")])
        case("bool_bool", op, [v("bool"), v("bool")])
        case("bcast_transposed", op, [tr(3, 4), T([4])])
        case("0dim_float64_int", op, [z("float64"), v("int32")])
        case("complex_err", op, [v("complex64"), v("complex64")])
        case("bcast_err", op, [T([2, 3]), T([2])])

    for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
        case("float_float", op, [v("float32"), v("float32")])
        case("int_float_scalar", op, [v("int64"), S(0.5)])
        case("bcast_transposed", op, [tr(3, 4), T([3, 1], dtype="int32")])
        case("bcast_err", op, [T([3]), T([4])])
    case("channels_last_bf16", "eq", [cl(2, 3, 2, 2, dtype="bfloat16"), cl(2, 3, 2, 2)])
    case("complex_complex", "eq", [v("complex64"), v("complex128")])
    case("complex_err", "lt", [v("complex64"), v("complex64")])
    case("bool_bool", "gt", [v("bool"), v("bool")])
    case("zero_size", "le", [T([0, 2]), T([2])])
    case("0dim_0dim", "ge", [z("int8"), z("uint8")])

    # In-place: self's shape and dtype are fixed; result returned is self.
    for op in INPLACE:
        case("same_shape", op, [T([2, 3]), T([2, 3])])
        case("bcast_other", op, [T([2, 3]), T([3])])
        case("transposed_self", op, [tr(3, 4), T([3, 4])])
        case("float_self_int_other", op, [v("float32"), v("int64")])
        case("f16_self_f32_other", op, [v("float16"), v("float32")])
        case("scalar_other", op, [v("float32"), S(2)])
        case("self_needs_bcast_err", op, [T([3]), T([2, 3])])
        case("bcast_err", op, [T([2, 3]), T([2])])
    case("int_self_float_other_err", "add_", [v("int64"), v("float32")])
    case("int_self_float_scalar_err", "mul_", [v("int32"), S(2.5)])
    case("int_self_int_ok", "mul_", [v("int32"), v("int64")])
    case("int_self_int_div_err", "div_", [v("int64"), v("int64")])
    case("bool_self_int_err", "add_", [v("bool"), v("int64")])
    case("float_self_complex_err", "add_", [v("float32"), v("complex64")])
    case("expanded_self_overlap_err", "add_", [expanded([2, 3], [3]), T([2, 3])])
    case("stepped_self", "add_", [stepped([2, 3], [2, 2]), T([2, 3])])
    case("channels_last_self", "mul_", [cl(2, 3, 2, 2), T([2, 3, 2, 2])])
    case("0dim_self_0dim_other", "add_", [z("float32"), z("float64")])
    case("0dim_self_bcast_err", "add_", [z("float32"), v("float32")])
    case("offset_self", "sub_", [T([4], offset=2), S(1.0)])
    case("bool_self_sub_err", "sub_", [v("bool"), v("bool")])

    # where
    b3 = T([3], dtype="bool")
    case("same", "where", [b3, v("float32"), v("float32")])
    case("promote_f32_f64", "where", [b3, v("float32"), v("float64")])
    case("promote_int_float16", "where", [b3, v("int64"), v("float16")])
    case("scalar_other_keeps_float32", "where", [b3, v("float32"), S(0.0)])
    case("scalar_self_int_tensor", "where", [b3, S(1.5), v("int32")])
    case("bcast_all", "where", [T([2, 1], dtype="bool"), T([1, 3]), T([3])])
    case("transposed_inputs", "where", [tr(3, 4, dtype="bool"), tr(3, 4), tr(3, 4)])
    case("0dim_cond", "where", [T([], dtype="bool"), T([2, 2], dtype="bfloat16"),
                                T([2, 2], dtype="bfloat16")])
    case("uint8_cond_err", "where", [T([3], dtype="uint8"), v("float32"), v("float32")],
         prefer_meta=True,
         note="1.13 CPU accepts a uint8 condition with a deprecation warning; 1.13 meta and "
              "PyTorch >= 2.0 reject it")
    case("float_cond_err", "where", [T([3]), v("float32"), v("float32")])
    case("bcast_err", "where", [b3, T([2]), v("float32")])

    # to(dtype)
    case("same_dtype_is_self", "to", [tr(3, 4)], {"dtype": "float32"})
    case("same_dtype_copy_true", "to", [tr(3, 4)], {"dtype": "float32", "copy": True})
    case("to_bf16_transposed_preserves", "to", [tr(3, 4)], {"dtype": "bfloat16"})
    case("to_int64_contig", "to", [T([2, 3])], {"dtype": "int64"})
    case("to_f16_stepped_goes_contig", "to", [stepped([2, 3], [2, 1])], {"dtype": "float16"})
    case("to_bool_channels_last", "to", [cl(2, 3, 2, 2)], {"dtype": "bool"})
    case("to_f64_expanded", "to", [expanded([3, 4], [4])], {"dtype": "float64"})
    case("to_complex_0dim", "to", [T([])], {"dtype": "complex64"})
    case("to_cpu_err", "to", [T([3])], {"device": "cpu"}, cpu_check=False)


def corpus_reductions():
    X = T([2, 3, 4])
    for op in ["sum", "mean"]:
        case("all", op, [X])
        case("dim1", op, [X], {"dim": 1})
        case("dim_list_keepdim", op, [X], {"dim": [0, 2], "keepdim": True})
        case("neg_dim", op, [X], {"dim": [-1]})
        case("empty_dim_list_all", op, [X], {"dim": []})
        case("transposed_dim0", op, [tr(3, 4)], {"dim": 0})
        case("permuted_keepdim", op, [perm_of([2, 3, 4], [2, 0, 1])], {"dim": 1, "keepdim": True})
        case("channels_last_keepdim", op, [cl(2, 3, 4, 5)], {"dim": [2, 3], "keepdim": True})
        case("0dim", op, [T([])])
        case("0dim_dim0", op, [T([])], {"dim": 0})
        case("zero_size_all", op, [T([0, 3])])
        case("zero_size_dim0", op, [T([0, 3])], {"dim": 0})
        case("dtype_f64", op, [X], {"dtype": "float64", "dim": 1})
        case("f16", op, [T([2, 3], dtype="float16")], {"dim": 1})
        case("dim_out_of_range_err", op, [X], {"dim": 3})
        case("repeated_dim_err", op, [X], {"dim": [1, 1]})
    case("int32_to_int64", "sum", [T([2, 3], dtype="int32")])
    case("bool_to_int64", "sum", [T([4], dtype="bool")], {"dim": 0})
    case("uint8_to_int64", "sum", [T([4], dtype="uint8")])
    case("int_dtype_f32", "sum", [T([4], dtype="int64")], {"dtype": "float32"})
    case("f32_dtype_int_ok", "sum", [T([4])], {"dtype": "int32"})
    case("expanded_dim0", "sum", [expanded([3, 4], [4])], {"dim": 0})
    case("int_err", "mean", [T([2, 3], dtype="int64")])
    case("bool_err", "mean", [T([2, 3], dtype="bool")], {"dim": 0})
    case("int_with_float_dtype", "mean", [T([2, 3], dtype="int64")], {"dtype": "float32"})
    case("complex", "mean", [T([2, 3], dtype="complex64")], {"dim": 1})
    case("float_to_int_dtype_err", "mean", [T([2, 3])], {"dtype": "int64"})

    case("all", "amax", [X])
    case("dim1", "amax", [X], {"dim": 1})
    case("dims_keepdim", "amax", [X], {"dim": [0, 2], "keepdim": True})
    case("int64_keeps_dtype", "amax", [T([3, 2], dtype="int64")], {"dim": [0]})
    case("bool", "amax", [T([3], dtype="bool")])
    case("transposed", "amax", [tr(3, 4)], {"dim": [1]})
    case("0dim", "amax", [T([])])
    case("zero_size_nonreduced_dim_ok", "amax", [T([0, 3])], {"dim": [1]})
    case("zero_size_all_err", "amax", [T([0, 3])])
    case("zero_size_reduced_dim_err", "amax", [T([0, 3])], {"dim": [0]})
    case("complex_err", "amax", [T([3], dtype="complex64")])
    case("dim_out_of_range_err", "amax", [X], {"dim": [3]})

    case("all", "argmax", [X])
    case("dim1", "argmax", [X], {"dim": 1})
    case("dim1_keepdim", "argmax", [X], {"dim": 1, "keepdim": True})
    case("none_keepdim", "argmax", [X], {"dim": None, "keepdim": True})
    case("int32_input", "argmax", [T([5], dtype="int32")], {"dim": 0})
    case("transposed", "argmax", [tr(3, 4)], {"dim": 0})
    case("0dim", "argmax", [T([])])
    case("zero_size_nonreduced_dim_ok", "argmax", [T([0, 3])], {"dim": 1})
    case("zero_size_all_err", "argmax", [T([0, 3])])
    case("zero_size_reduced_dim_err", "argmax", [T([0, 3])], {"dim": 0})
    case("complex_err", "argmax", [T([3], dtype="complex64")])
    case("dim_out_of_range_err", "argmax", [X], {"dim": -4})

    for op in ["var", "var_mean"]:
        case("all", op, [X])
        case("dim1", op, [X], {"dim": [1]})
        case("dims_keepdim_correction0", op, [X], {"dim": [0, 2], "keepdim": True,
                                                   "correction": 0})
        case("unbiased_false", op, [X], {"dim": [2], "unbiased": False})
        case("f16_transposed", op, [tr(3, 4, dtype="float16")], {"dim": [0]})
        case("complex_gives_real", op, [T([2, 3], dtype="complex64")], {"dim": [1]})
        case("int_err", op, [T([2, 3], dtype="int64")])
        case("dim_out_of_range_err", op, [X], {"dim": [5]})
    case("correction2", "var", [T([5, 2])], {"dim": [0], "correction": 2})
    case("0dim", "var", [T([])])
    case("zero_size", "var", [T([0, 3])], {"dim": [0]})
    case("bool_err", "var", [T([3], dtype="bool")])


def corpus_linalg():
    mm_ = [
        ("1d_1d", T([3]), T([3])),
        ("1d_2d", T([3]), T([3, 4])),
        ("2d_1d", T([2, 3]), T([3])),
        ("2d_2d", T([2, 3]), T([3, 4])),
        ("1d_3d", T([3]), T([5, 3, 4])),
        ("3d_1d", T([5, 2, 3]), T([3])),
        ("2d_3d", T([2, 3]), T([5, 3, 4])),
        ("3d_2d", T([5, 2, 3]), T([3, 4])),
        ("3d_3d", T([5, 2, 3]), T([5, 3, 4])),
        ("3d_3d_bcast_batch", T([1, 2, 3]), T([5, 3, 4])),
        ("4d_3d_bcast", T([2, 1, 3, 4]), T([5, 4, 6])),
        ("4d_4d", T([2, 5, 3, 4]), T([2, 5, 4, 6])),
        ("1d_4d", T([4]), T([2, 3, 4, 5])),
        ("4d_1d", T([2, 3, 4, 5]), T([5])),
        ("4d_2d", T([2, 3, 4, 5]), T([5, 6])),
        ("2d_4d", T([4, 5]), T([2, 3, 5, 6])),
        ("transposed_both", tr(2, 3), tr(3, 4)),
        ("3d_transposed_rhs", T([5, 2, 3]), perm_of([5, 4, 3], [0, 2, 1])),
        ("int64_int64", T([2, 3], dtype="int64"), T([3, 2], dtype="int64")),
        ("zero_inner", T([2, 0]), T([0, 3])),
        ("zero_batch", T([0, 2, 3]), T([3, 4])),
        ("bf16", T([2, 3], dtype="bfloat16"), T([3, 4], dtype="bfloat16")),
    ]
    for name, a, b in mm_:
        case(name, "matmul", [a, b])
    case("inner_mismatch_err", "matmul", [T([2, 3]), T([4, 5])])
    case("1d_mismatch_err", "matmul", [T([3]), T([4])])
    case("batch_bcast_err", "matmul", [T([2, 2, 3]), T([3, 3, 4])])
    case("0dim_err", "matmul", [T([]), T([3])])
    case("dtype_mismatch_err", "matmul", [T([2, 3]), T([3, 4], dtype="float64")])

    case("basic", "mm", [T([2, 3]), T([3, 4])])
    case("transposed_inputs", "mm", [tr(2, 3), tr(3, 4)])
    case("offset_inputs", "mm", [T([2, 3], offset=2), T([3, 4], offset=1)])
    case("zero_rows", "mm", [T([0, 3]), T([3, 4])])
    case("f16", "mm", [T([2, 3], dtype="float16"), T([3, 4], dtype="float16")])
    case("inner_mismatch_err", "mm", [T([2, 3]), T([2, 4])])
    case("3d_err", "mm", [T([1, 2, 3]), T([3, 4])])
    case("1d_err", "mm", [T([3]), T([3, 4])])
    case("dtype_mismatch_err", "mm", [T([2, 3]), T([3, 4], dtype="float64")])

    case("basic", "bmm", [T([5, 2, 3]), T([5, 3, 4])])
    case("transposed_rhs", "bmm", [T([5, 2, 3]), perm_of([5, 4, 3], [0, 2, 1])])
    case("zero_batch", "bmm", [T([0, 2, 3]), T([0, 3, 4])])
    case("batch_mismatch_err", "bmm", [T([5, 2, 3]), T([4, 3, 4])])
    case("no_batch_bcast_err", "bmm", [T([1, 2, 3]), T([5, 3, 4])])
    case("2d_err", "bmm", [T([2, 3]), T([3, 4])])
    case("inner_mismatch_err", "bmm", [T([5, 2, 3]), T([5, 2, 4])])

    case("full_bias", "addmm", [T([2, 4]), T([2, 3]), T([3, 4])])
    case("row_bias_bcast", "addmm", [T([4]), T([2, 3]), T([3, 4])])
    case("scalar_bias_0dim", "addmm", [T([]), T([2, 3]), T([3, 4])])
    case("beta_alpha", "addmm", [T([1, 4]), tr(2, 3), T([3, 4])], {"beta": 0.5, "alpha": 2.0})
    case("bias_bcast_err", "addmm", [T([3]), T([2, 3]), T([3, 4])])
    case("inner_mismatch_err", "addmm", [T([2, 4]), T([2, 3]), T([2, 4])])
    case("mat_3d_err", "addmm", [T([2, 4]), T([1, 2, 3]), T([3, 4])])

    case("full_bias", "baddbmm", [T([5, 2, 4]), T([5, 2, 3]), T([5, 3, 4])])
    case("bcast_bias", "baddbmm", [T([4]), T([5, 2, 3]), T([5, 3, 4])])
    case("beta0", "baddbmm", [T([1, 2, 4]), T([5, 2, 3]), T([5, 3, 4])], {"beta": 0.0})
    case("bias_bcast_err", "baddbmm", [T([3, 2, 4]), T([5, 2, 3]), T([5, 3, 4])])
    case("batch_mismatch_err", "baddbmm", [T([5, 2, 4]), T([5, 2, 3]), T([4, 3, 4])])

    case("1d_no_bias", "linear", [T([3]), T([4, 3])])
    case("1d_bias", "linear", [T([3]), T([4, 3]), T([4])])
    case("2d_bias", "linear", [T([2, 3]), T([4, 3]), T([4])])
    case("2d_no_bias", "linear", [T([2, 3]), T([4, 3])])
    case("3d_bias", "linear", [T([2, 5, 3]), T([4, 3]), T([4])])
    case("3d_no_bias_transposed_input", "linear", [perm_of([5, 2, 3], [1, 0, 2]), T([4, 3])])
    case("4d_bias", "linear", [T([2, 2, 5, 3]), T([4, 3]), T([4])])
    case("transposed_weight", "linear", [T([2, 3]), tr(4, 3)])
    case("zero_tokens", "linear", [T([0, 3]), T([4, 3]), T([4])])
    case("bf16", "linear", [T([2, 3], dtype="bfloat16"), T([4, 3], dtype="bfloat16"),
                            T([4], dtype="bfloat16")])
    case("in_features_mismatch_err", "linear", [T([2, 3]), T([4, 5])])
    case("bias_mismatch_err", "linear", [T([2, 3]), T([4, 3]), T([5])])
    case("dtype_mismatch_err", "linear", [T([2, 3]), T([4, 3], dtype="float16")])
    case("0dim_input_err", "linear", [T([]), T([4, 3])])


def corpus_join():
    cases = [
        ("dim0", [T([2, 3]), T([4, 3])], 0),
        ("dim1", [T([2, 3]), T([2, 1])], 1),
        ("neg_dim", [T([2, 3]), T([2, 2])], -1),
        ("three_inputs", [T([1, 2]), T([2, 2]), T([3, 2])], 0),
        ("single", [T([2, 3])], 0),
        ("transposed_inputs", [tr(2, 3), tr(2, 3)], 0),
        ("channels_last_inputs", [cl(2, 3, 2, 2), cl(2, 3, 2, 2)], 1),
        ("mixed_layout", [tr(2, 3), T([2, 3])], 0),
        ("legacy_empty_1d_skipped", [T([0]), T([2, 3])], 0),
        ("legacy_empty_1d_skipped_dim1", [T([2, 3]), T([0]), T([2, 2])], 1),
        ("all_empty_1d", [T([0]), T([0])], 0),
        ("zero_size_2d_kept", [T([0, 3]), T([2, 3])], 0),
        ("promote_int_float", [T([2], dtype="int32"), T([3])], 0),
        ("promote_bf16_f16", [T([1, 2], dtype="bfloat16"), T([1, 2], dtype="float16")], 0),
        ("promote_bool_uint8", [T([2], dtype="bool"), T([2], dtype="uint8")], 0),
        ("promote_0d_not_special", [T([2], dtype="int8"), T([1], dtype="float64")], 0),
        ("offset_and_stepped", [T([2, 2], offset=3), stepped([2, 2], [2, 2])], 1),
        ("expanded_input", [expanded([2, 3], [3]), T([1, 3])], 0),
    ]
    for name, ins, d in cases:
        case(name, "cat", ins, {"dim": d})
    case("rank_mismatch_err", "cat", [T([2, 3]), T([3])], {"dim": 0})
    case("size_mismatch_err", "cat", [T([2, 3]), T([2, 4])], {"dim": 0})
    case("dim_out_of_range_err", "cat", [T([2, 3]), T([2, 3])], {"dim": 2})
    case("empty_list_err", "cat", [], {"dim": 0})
    case("0dim_err", "cat", [T([]), T([])], {"dim": 0})

    cases = [
        ("dim0", [T([2, 3]), T([2, 3])], 0),
        ("dim1", [T([2, 3]), T([2, 3]), T([2, 3])], 1),
        ("dim_last", [T([2, 3]), T([2, 3])], 2),
        ("neg_dim", [T([2, 3]), T([2, 3])], -1),
        ("0dim_inputs", [T([]), T([]), T([])], 0),
        ("transposed_inputs", [tr(2, 3), tr(2, 3)], 0),
        ("promote", [T([2], dtype="int64"), T([2], dtype="float16")], 0),
        ("zero_size", [T([0, 2]), T([0, 2])], 1),
        ("single", [T([3], offset=1)], 0),
    ]
    for name, ins, d in cases:
        case(name, "stack", ins, {"dim": d})
    case("shape_mismatch_err", "stack", [T([2, 3]), T([3, 2])], {"dim": 0})
    case("dim_out_of_range_err", "stack", [T([2, 3]), T([2, 3])], {"dim": 3})
    case("empty_list_err", "stack", [], {"dim": 0})


def corpus_nn():
    W = T([10, 4])
    case("1d_indices", "embedding", [T([5], dtype="int64"), W])
    case("2d_indices", "embedding", [T([2, 3], dtype="int64"), W])
    case("int32_indices", "embedding", [T([3], dtype="int32"), W])
    case("0dim_index", "embedding", [T([], dtype="int64"), W])
    case("transposed_indices", "embedding", [tr(2, 3, dtype="int64"), W])
    case("transposed_weight", "embedding", [T([3], dtype="int64"), tr(10, 4)])
    case("padding_idx", "embedding", [T([2, 2], dtype="int64"), W], {"padding_idx": 0})
    case("bf16_weight", "embedding", [T([3], dtype="int64"), T([10, 4], dtype="bfloat16")])
    case("zero_indices", "embedding", [T([0], dtype="int64"), W])
    case("float_indices_err", "embedding", [T([3]), W])
    case("weight_1d_err", "embedding", [T([3], dtype="int64"), T([10])])

    X = T([2, 3, 4])
    case("last_dim", "layer_norm", [X], {"normalized_shape": [4]})
    case("last_two", "layer_norm", [X], {"normalized_shape": [3, 4]})
    case("weight_bias", "layer_norm", [X, T([4]), T([4])], {"normalized_shape": [4]})
    case("weight_only", "layer_norm", [X, T([3, 4])], {"normalized_shape": [3, 4]})
    case("transposed_input", "layer_norm", [tr(3, 4), T([4]), T([4])],
         {"normalized_shape": [4]})
    case("bf16", "layer_norm", [T([2, 4], dtype="bfloat16"), T([4], dtype="bfloat16"),
                                T([4], dtype="bfloat16")], {"normalized_shape": [4]})
    case("zero_batch", "layer_norm", [T([0, 4])], {"normalized_shape": [4]})
    case("shape_mismatch_err", "layer_norm", [X], {"normalized_shape": [3]})
    case("weight_shape_err", "layer_norm", [X, T([3])], {"normalized_shape": [4]})
    case("too_many_dims_err", "layer_norm", [T([4])], {"normalized_shape": [2, 4]})
    case("int_input_err", "layer_norm", [T([2, 4], dtype="int64")], {"normalized_shape": [4]})

    for op in ["softmax", "log_softmax"]:
        case("last", op, [X], {"dim": -1})
        case("dim0", op, [X], {"dim": 0})
        case("transposed_input", op, [tr(3, 4)], {"dim": 1})
        case("permuted_input", op, [perm_of([2, 3, 4], [2, 0, 1])], {"dim": 1})
        case("dtype_f64", op, [X], {"dim": -1, "dtype": "float64"})
        case("f16_to_f32", op, [T([2, 3], dtype="float16")], {"dim": 1, "dtype": "float32"})
        case("bf16", op, [T([2, 3], dtype="bfloat16")], {"dim": 0})
        case("0dim", op, [T([])], {"dim": 0})
        case("zero_size", op, [T([0, 3])], {"dim": 1})
        case("int_with_dtype", op, [T([2, 3], dtype="int64")], {"dim": 1, "dtype": "float32"})
        case("int_err", op, [T([2, 3], dtype="int64")], {"dim": 1})
        case("dim_out_of_range_err", op, [X], {"dim": 3})

    for approx in ["none", "tanh"]:
        case(f"{approx}_contig", "gelu", [X], {"approximate": approx})
        case(f"{approx}_transposed", "gelu", [tr(3, 4)], {"approximate": approx})
    case("bf16", "gelu", [T([3], dtype="bfloat16")])
    case("channels_last", "gelu", [cl(2, 3, 2, 2)])
    case("0dim", "gelu", [T([])])
    case("bad_approximate_err", "gelu", [X], {"approximate": "fast"})
    case("int_err", "gelu", [T([3], dtype="int64")])

    case("contig", "silu", [X])
    case("transposed", "silu", [tr(3, 4)])
    case("f16_stepped", "silu", [stepped([2, 3], [2, 1], dtype="float16")])
    case("zero_size", "silu", [T([0])])
    case("int_err", "silu", [T([3], dtype="int64")])

    case("train", "dropout", [X], {"p": 0.5, "train": True})
    case("train_transposed", "dropout", [tr(3, 4)], {"p": 0.1, "train": True})
    case("train_p0", "dropout", [X], {"p": 0.0, "train": True})
    case("train_p1", "dropout", [X], {"p": 1.0, "train": True})
    case("eval_returns_self", "dropout", [tr(3, 4)], {"p": 0.5, "train": False})
    case("bf16_train", "dropout", [T([4], dtype="bfloat16")], {"p": 0.2, "train": True})
    case("p_above_1_err", "dropout", [X], {"p": 1.5, "train": True})
    case("p_negative_err", "dropout", [X], {"p": -0.1, "train": False})

    L = T([4, 5])
    tgt = T([4], dtype="int64")
    for red in ["mean", "sum", "none"]:
        case(f"indices_{red}", "cross_entropy", [L, tgt], {"reduction": red})
        case(f"spatial_indices_{red}", "cross_entropy",
             [T([2, 5, 3, 3]), T([2, 3, 3], dtype="int64")], {"reduction": red})
        case(f"probs_{red}", "cross_entropy", [L, T([4, 5])], {"reduction": red})
    case("unbatched_indices", "cross_entropy", [T([5]), T([], dtype="int64")])
    case("unbatched_probs", "cross_entropy", [T([5]), T([5])], {"reduction": "none"})
    case("ignore_index", "cross_entropy", [L, tgt], {"ignore_index": 1})
    case("label_smoothing", "cross_entropy", [L, tgt], {"label_smoothing": 0.1,
                                                         "reduction": "none"})
    case("probs_label_smoothing", "cross_entropy", [L, T([4, 5])], {"label_smoothing": 0.2})
    case("class_weight", "cross_entropy", [L, tgt, T([5])], {"reduction": "sum"})
    case("bf16_logits", "cross_entropy", [T([4, 5], dtype="bfloat16"), tgt])
    case("transposed_logits", "cross_entropy", [tr(4, 5), tgt], {"reduction": "none"})
    case("zero_batch_sum", "cross_entropy", [T([0, 5]), T([0], dtype="int64")],
         {"reduction": "sum"})
    case("target_batch_mismatch_err", "cross_entropy", [L, T([3], dtype="int64")])
    case("probs_shape_mismatch_err", "cross_entropy", [L, T([4, 4])])
    case("int32_target_err", "cross_entropy", [L, T([4], dtype="int32")])
    case("spatial_target_shape_err", "cross_entropy",
         [T([2, 5, 3, 3]), T([2, 3, 4], dtype="int64")])
    case("weight_shape_err", "cross_entropy", [L, tgt, T([4])])
    case("bad_reduction_err", "cross_entropy", [L, tgt], {"reduction": "avg"})

    q = T([2, 4, 5, 8])
    kv = T([2, 4, 6, 8])
    case("basic", "scaled_dot_product_attention", [q, kv, kv])
    case("causal", "scaled_dot_product_attention", [q, T([2, 4, 5, 8]), T([2, 4, 5, 8])],
         {"is_causal": True})
    case("value_dim_differs", "scaled_dot_product_attention", [q, kv, T([2, 4, 6, 16])])
    case("bool_mask_bcast", "scaled_dot_product_attention",
         [q, kv, kv, T([5, 6], dtype="bool")])
    case("float_mask", "scaled_dot_product_attention", [q, kv, kv, T([2, 1, 5, 6])])
    case("scale_arg", "scaled_dot_product_attention", [q, kv, kv], {"scale": 0.5})
    case("3d_inputs", "scaled_dot_product_attention", [T([4, 5, 8]), T([4, 6, 8]),
                                                       T([4, 6, 8])])
    case("gqa_8q_2kv", "scaled_dot_product_attention",
         [T([2, 8, 5, 8]), T([2, 2, 6, 8]), T([2, 2, 6, 8])], {"enable_gqa": True})
    case("bf16", "scaled_dot_product_attention",
         [T([1, 2, 3, 4], dtype="bfloat16")] * 3)
    case("transposed_q", "scaled_dot_product_attention",
         [perm_of([2, 5, 4, 8], [0, 2, 1, 3]), kv, kv])
    case("head_dim_mismatch_err", "scaled_dot_product_attention", [q, T([2, 4, 6, 7]),
                                                                   T([2, 4, 6, 7])])
    case("gqa_indivisible_err", "scaled_dot_product_attention",
         [T([2, 6, 5, 8]), T([2, 4, 6, 8]), T([2, 4, 6, 8])], {"enable_gqa": True})
    case("heads_mismatch_no_gqa_err", "scaled_dot_product_attention",
         [T([2, 8, 5, 8]), T([2, 2, 6, 8]), T([2, 2, 6, 8])])
    case("mask_with_causal_err", "scaled_dot_product_attention",
         [q, kv, kv, T([5, 6], dtype="bool")], {"is_causal": True})
    case("dtype_mismatch_err", "scaled_dot_product_attention",
         [q, T([2, 4, 6, 8], dtype="float16"), kv])

    case("last_dim", "rms_norm", [T([2, 3, 4])], {"normalized_shape": [4], "eps": 1e-6})
    case("weight", "rms_norm", [T([2, 3, 4]), T([4])], {"normalized_shape": [4]})
    case("last_two_weight", "rms_norm", [T([2, 3, 4]), T([3, 4])], {"normalized_shape": [3, 4]})
    case("bf16_input_bf16_weight", "rms_norm", [T([2, 4], dtype="bfloat16"),
                                                T([4], dtype="bfloat16")],
         {"normalized_shape": [4]})
    case("bf16_input_f32_weight", "rms_norm", [T([2, 4], dtype="bfloat16"), T([4])],
         {"normalized_shape": [4]})
    case("f16_no_weight", "rms_norm", [T([3, 4], dtype="float16")], {"normalized_shape": [4]})
    case("transposed_input", "rms_norm", [tr(3, 4)], {"normalized_shape": [4]})
    case("shape_mismatch_err", "rms_norm", [T([2, 3, 4])], {"normalized_shape": [3]})
    case("weight_shape_err", "rms_norm", [T([2, 3, 4]), T([5])], {"normalized_shape": [4]})

    # Gated DeltaNet's causal depthwise convolution (padding K - 1, groups = channels) and the
    # general forms around it.
    case("depthwise_causal", "conv1d", [T([2, 6, 5]), T([6, 1, 4])], {"padding": 3, "groups": 6})
    case("depthwise_causal_bf16", "conv1d",
         [T([2, 6, 5], dtype="bfloat16"), T([6, 1, 4], dtype="bfloat16")],
         {"padding": 3, "groups": 6})
    case("unbatched", "conv1d", [T([6, 5]), T([6, 1, 4])], {"padding": 3, "groups": 6})
    case("transposed_input", "conv1d", [perm_of([2, 5, 6], [0, 2, 1]), T([6, 1, 4])],
         {"padding": 3, "groups": 6})
    case("dense_bias", "conv1d", [T([2, 3, 10]), T([4, 3, 3]), T([4])])
    case("stride_dilation", "conv1d", [T([1, 4, 11]), T([8, 2, 3])],
         {"stride": 2, "padding": 1, "dilation": 2, "groups": 2})
    case("kernel_equals_input", "conv1d", [T([1, 2, 3]), T([2, 2, 3])])
    case("channels_err", "conv1d", [T([2, 5, 10]), T([4, 3, 3])])
    case("kernel_too_large_err", "conv1d", [T([1, 2, 3]), T([2, 2, 4])])
    case("groups_out_err", "conv1d", [T([1, 4, 8]), T([3, 2, 3])], {"groups": 2})
    case("input_4d_err", "conv1d", [T([1, 1, 2, 8]), T([2, 2, 3])])
    case("weight_2d_err", "conv1d", [T([1, 2, 8]), T([2, 2])])
    case("dtype_mismatch_err", "conv1d", [T([1, 2, 8]), T([2, 2, 3], dtype="float64")])
    case("bias_shape_err", "conv1d", [T([1, 2, 8]), T([2, 2, 3]), T([3])])
    case("negative_padding_err", "conv1d", [T([1, 2, 8]), T([2, 2, 3])], {"padding": -1})
    case("no_out_channels_err", "conv1d", [T([1, 2, 8]), T([0, 2, 3])])
    case("groups_beyond_out_err", "conv1d", [T([1, 0, 8]), T([0, 0, 3])], {"groups": 2})
    case("zero_kernel_err", "conv1d", [T([1, 2, 8]), T([2, 2, 0])])


def corpus_data_dependent():
    for name, ins in [("1d", [T([3])]), ("bool", [T([2, 2], dtype="bool")])]:
        case(name, "nonzero", ins, cpu_check=False)
    case("0dim", "item", [T([])], cpu_check=False)
    case("1elem", "item", [T([1], dtype="int64")], cpu_check=False)
    case("1d_mask", "index_mask", [T([4]), T([4], dtype="bool")], cpu_check=False)
    case("2d_mask", "index_mask", [T([2, 3]), T([2, 3], dtype="bool")], cpu_check=False)
    case("contig", "cpu", [T([3])], cpu_check=False)
    case("transposed", "cpu", [tr(2, 3)], cpu_check=False)


def corpus_layout_edges():
    """Adversarial layouts: size-1 dims with arbitrary strides, mixed memory orders, overlap."""
    odd1 = T([2, 1, 3], [1, 7, 2])          # size-1 dim with a stride nobody would pick
    case("size1_odd_strides_plus_contig", "add", [odd1, T([2, 1, 3])])
    case("contig_plus_size1_odd_strides", "add", [T([2, 1, 3]), odd1])
    case("permuted_plus_bcast_col", "add", [perm_of([3, 4, 5], [2, 1, 0]), T([5, 1, 1])])
    case("bcast_col_plus_permuted", "add", [T([5, 1, 1]), perm_of([3, 4, 5], [2, 1, 0])])
    case("two_different_permutations", "add", [perm_of([2, 3, 4], [2, 0, 1]),
                                               perm_of([4, 2, 3], [0, 1, 2])])
    case("expanded_both_ways", "add", [expanded([3, 4], [3, 1]), expanded([3, 4], [4])])
    case("channels_last_plus_permuted", "add", [cl(2, 3, 2, 2), perm_of([2, 2, 3, 2],
                                                                        [0, 2, 3, 1])])
    case("ambiguous_1x1_channels_last", "mul", [cl(2, 3, 1, 1), T([2, 3, 1, 1])])
    case("stepped_offset_both", "mul", [stepped([2, 3], [2, 2], offset=1),
                                        stepped([2, 3], [1, 2], offset=2)])
    case("rank3_bcast_transposed_lhs", "sub", [perm_of([2, 4, 3], [0, 2, 1]), T([1, 4])])
    case("three_layouts", "where", [T([3, 4], dtype="bool"), tr(3, 4), stepped([3, 4], [1, 2])])
    case("permuted_cond", "where", [perm_of([2, 3, 4], [2, 0, 1], dtype="bool"),
                                    T([4, 2, 3]), S(1.0)])
    case("cmp_permuted_vs_scalar", "gt", [perm_of([2, 3, 4], [1, 2, 0]), S(0)])
    case("inplace_permuted_self_contig_other", "mul_", [perm_of([2, 3, 4], [2, 0, 1]),
                                                        T([4, 2, 3])])
    case("inplace_self_bcast_other_transposed", "add_", [T([3, 4]), tr(1, 4)])

    case("permuted_offset", "exp", [perm_of([2, 3, 4], [1, 2, 0], offset=5)])
    case("size1_odd_strides", "neg", [odd1])
    case("overlapping_expanded_3d", "sigmoid", [expanded([2, 3, 4], [1, 4])])
    case("zero_size_permuted", "abs", [perm_of([0, 3, 2], [2, 0, 1])])

    case("size1_odd_strides", "empty_like", [odd1])
    case("overlap_stride0_and_permuted", "empty_like", [T([3, 4], [0, 3], storage_numel=10)])
    case("permuted_offset_4d", "empty_like", [perm_of([2, 3, 4, 5], [3, 1, 0, 2], offset=7)])
    case("dtype_change_channels_last", "empty_like", [cl(2, 3, 4, 5)], {"dtype": "float16"})

    case("size1_odd_strides_to_6_err", "view", [odd1], {"size": [6]})
    case("insert_ones_stepped", "view", [stepped([4, 3], [2, 2])], {"size": [4, 1, 3, 1]})
    case("drop_ones_transposed", "view", [T([3, 1, 4], [1, 9, 3])], {"size": [3, 4]})
    case("all_stride0_merge", "view", [expanded([3, 4], [1])], {"size": [12]})
    case("zero_size_noncontig", "view", [T([0, 4], [1, 0])], {"size": [2, 0, 2]})
    case("permuted_split_last", "view", [perm_of([4, 6], [1, 0])], {"size": [3, 2, 4]})
    case("permuted_merge_err", "view", [perm_of([2, 3, 4], [0, 2, 1])], {"size": [2, 12]})
    case("all_stride0_expanded", "reshape", [expanded([3, 4], [1])], {"size": [2, 6]})
    case("zero_size_transposed", "reshape", [perm_of([3, 0], [1, 0])], {"size": [-1]})
    case("size1_odd_strides", "reshape", [odd1], {"size": [3, 2]})
    case("stepped_compatible_view", "reshape", [stepped([4, 6], [2, 1])], {"size": [4, 2, 3]})
    case("stride0_keeps_view", "unsqueeze", [expanded([3, 4], [4])], {"dim": 1})
    case("zero_size_all", "squeeze", [T([0, 1, 3], [3, 3, 1])])
    case("size1_odd_strides", "squeeze", [odd1], {"dim": 1})
    case("size1_odd_strides", "contiguous", [odd1])
    case("permuted_3d", "to", [perm_of([2, 3, 4], [2, 0, 1])], {"dtype": "float64"})
    case("size1_odd_strides", "to", [odd1], {"dtype": "int32"})

    case("permuted_keepdim_last", "sum", [perm_of([2, 3, 4], [1, 2, 0])],
         {"dim": [2], "keepdim": True})
    case("expanded_all", "mean", [expanded([3, 4], [4])])
    case("channels_last_dim1", "amax", [cl(2, 3, 4, 5)], {"dim": [1], "keepdim": True})
    case("channels_last_input", "softmax", [cl(2, 3, 2, 2)], {"dim": 1})
    case("permuted_input", "dropout", [perm_of([2, 3, 4], [2, 0, 1])], {"p": 0.3, "train": True})
    case("channels_last_and_contig", "cat", [cl(2, 3, 2, 2), T([2, 3, 2, 2])], {"dim": 0})
    case("contig_and_channels_last", "cat", [T([2, 3, 2, 2]), cl(2, 3, 2, 2)], {"dim": 0})
    case("permuted_inputs_dim1", "cat", [perm_of([2, 3, 4], [2, 0, 1]),
                                         perm_of([2, 3, 4], [2, 0, 1])], {"dim": 1})
    case("channels_last_inputs", "stack", [cl(1, 3, 2, 2), cl(1, 3, 2, 2)], {"dim": 0})
    case("expanded_inputs", "matmul", [expanded([4, 2, 3], [2, 3]), expanded([4, 3, 5], [3, 5])])
    case("batch_bcast_transposed_lhs", "matmul", [perm_of([3, 2, 4], [0, 2, 1]),
                                                  T([2, 1, 2, 5])])
    case("expanded_batch", "bmm", [expanded([4, 2, 3], [2, 3]), T([4, 3, 5])])
    case("channels_last_input", "gelu", [cl(1, 2, 3, 3)], {"approximate": "tanh"})


def build_corpus():
    corpus_factories()
    corpus_views()
    corpus_pointwise()
    corpus_reductions()
    corpus_linalg()
    corpus_join()
    corpus_nn()
    corpus_layout_edges()
    corpus_data_dependent()


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data",
                                                  "meta_ops_oracle.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    build_corpus()

    ids = [c["id"] for c in CASES]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate case ids: {sorted(dup)}"
    safe = [re.sub(r"[^A-Za-z0-9]", "_", i) for i in ids]
    assert len(set(safe)) == len(safe), "case ids collide once made gtest-safe"

    out_cases, n_meta_diff = [], 0
    for c in CASES:
        expect, meta, gap = evaluate(c)
        rec = {"id": c["id"], "op": c["op"], "inputs": c["inputs"], "args": c["args"],
               "expect": expect}
        if c["op"] in DERIVED_NOTES:
            rec["derived"] = DERIVED_NOTES[c["op"]]
        if meta is not None:
            rec["meta_1_13"] = meta
            n_meta_diff += 1
        note = c["_note"]
        if gap:
            gap_note = f"CPU 1.13 lacks this kernel ({gap}); meta's answer"
            note = f"{note}; {gap_note}" if note else gap_note
        if note:
            rec["note"] = note
        # Error-case ids end in "_err": keep the corpus honest about which is which.
        if c["id"].endswith("_err") and expect["ok"]:
            print(f"warning: {c['id']} was expected to fail but succeeded", file=sys.stderr)
        if not c["id"].endswith("_err") and not expect["ok"] and c["_cpu_check"]:
            print(f"warning: {c['id']} failed: {expect['error']}", file=sys.stderr)
        out_cases.append(rec)

    lines = ["{", '"format_version": 1,', '"generator": "scripts/gen_meta_oracle.py",',
             f'"torch_version": {json.dumps(torch.__version__)},', '"cases": [']
    body = [json.dumps(c, sort_keys=True) for c in out_cases]
    lines.append(",\n".join(body))
    lines.append("]}")
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, args.out)

    per_op = {}
    for c in out_cases:
        ok, err = per_op.get(c["op"], (0, 0))
        per_op[c["op"]] = (ok + c["expect"]["ok"], err + (not c["expect"]["ok"]))
    print(f"{len(out_cases)} cases, {len(per_op)} ops, {n_meta_diff} where meta 1.13 != CPU "
          f"-> {os.path.relpath(args.out)}", file=sys.stderr)
    for op in sorted(per_op):
        print(f"  {op:30s} ok {per_op[op][0]:3d}  err {per_op[op][1]:3d}", file=sys.stderr)


if __name__ == "__main__":
    main()
