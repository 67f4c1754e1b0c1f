#!/usr/bin/python3
"""Write a model's parameters and buffers as a shardplan tensor description (tensor/describe.h).

The PyTorch side of `shardplan inspect --description`: builds a model on the meta device (no
memory, no data) and writes, for every named parameter and buffer, its layout, dtype and storage,
keeping aliasing: tensors on one storage share a storage id (a tied weight listed under two names
is one storage), and a view whose `._base` is listed names it in `view_of`.

    /usr/bin/python3 scripts/export_description.py gpt2-small \
        -o configs/examples/gpt2-small.description.json
    /usr/bin/python3 scripts/export_description.py --factory mypkg.models:build_on_meta -o m.json

Run it with Debian's /usr/bin/python3 (torch 1.13); the pyenv python3 on PATH has no torch. Only
torch is needed: the built-in GPT-2 is written here in plain torch.nn (no `transformers`).
"""

import argparse
import importlib
import json
import math
import os
import sys
import tempfile

import torch
from torch import nn

FORMAT = "shardplan.tensors"
VERSION = 1


# ---- GPT-2 small, with Hugging Face GPT2LMHeadModel's module names ---------------------------
# Shapes from OpenAI's GPT-2 release (hparams.json of the 124M model): vocabulary 50257, context
# 1024, width 768, 12 layers, 12 heads, MLP 4x. Module layout and names follow transformers'
# modeling_gpt2.py (4.3x), so parameter names match the Hub checkpoint's.

class Conv1D(nn.Module):
    """transformers' Conv1D: a linear layer whose weight is stored [in, out] (the TF layout)."""

    def __init__(self, nf, nx, device):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf, device=device))
        self.bias = nn.Parameter(torch.empty(nf, device=device))


class GPT2Attention(nn.Module):
    def __init__(self, d, n_ctx, device):
        super().__init__()
        # Buffers as in transformers 4.3x: a causal mask sliced (viewed) out of a [n_ctx, n_ctx]
        # tril, and a 0-dim fill value. Neither is persistent (not in the checkpoint) but both are
        # in named_buffers(), so they exercise bool, 0-dim and a view whose base is not listed.
        mask = torch.tril(torch.ones(n_ctx, n_ctx, dtype=torch.bool, device=device))
        self.register_buffer("bias", mask.view(1, 1, n_ctx, n_ctx), persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e4, device=device), persistent=False)
        self.c_attn = Conv1D(3 * d, d, device)
        self.c_proj = Conv1D(d, d, device)


class GPT2MLP(nn.Module):
    def __init__(self, d, hidden, device):
        super().__init__()
        self.c_fc = Conv1D(hidden, d, device)
        self.c_proj = Conv1D(d, hidden, device)


class GPT2Block(nn.Module):
    def __init__(self, d, n_ctx, device):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-5, device=device)
        self.attn = GPT2Attention(d, n_ctx, device)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5, device=device)
        self.mlp = GPT2MLP(d, 4 * d, device)


class GPT2Model(nn.Module):
    def __init__(self, vocab, n_ctx, d, n_layer, device):
        super().__init__()
        self.wte = nn.Embedding(vocab, d, device=device)
        self.wpe = nn.Embedding(n_ctx, d, device=device)
        self.h = nn.ModuleList(GPT2Block(d, n_ctx, device) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d, eps=1e-5, device=device)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab=50257, n_ctx=1024, d=768, n_layer=12, device="meta"):
        super().__init__()
        self.transformer = GPT2Model(vocab, n_ctx, d, n_layer, device)
        self.lm_head = nn.Linear(d, vocab, bias=False, device=device)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as tie_word_embeddings=True


# OpenAI's published size of GPT-2 small ("124M"), the LM head tied to wte and counted once.
GPT2_SMALL_PARAMETERS = 124_439_808

BUILTIN_MODELS = {"gpt2-small": (GPT2LMHeadModel, GPT2_SMALL_PARAMETERS)}


# ---- description --------------------------------------------------------------------------------

def _storage_key(t):
    """The identity of t's storage (its StorageImpl address); data_ptr() is 0 for every meta tensor."""
    if hasattr(t, "untyped_storage"):  # torch >= 2.0
        return t.untyped_storage()._cdata
    return t.storage()._cdata  # torch 1.13: TypedStorage._cdata is the StorageImpl


def _storage_nbytes(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().nbytes()
    return t.storage().nbytes()


def named_tensors(model):
    """Every parameter, then every buffer, under every name it has (tied weights listed twice).

    Same order as named_parameters() / named_buffers(), without their de-duplication (torch 1.13's
    named_parameters has no remove_duplicate=False).
    """
    modules = list(model.named_modules(remove_duplicate=False))
    out = []
    for table in ("_parameters", "_buffers"):
        for prefix, module in modules:
            for name, t in getattr(module, table).items():
                if t is not None:
                    out.append((prefix + "." + name if prefix else name, t))
    return out


def describe(named):
    """The description of [(name, tensor)]: storage ids in order of first appearance."""
    storage_ids, storages, first_name = {}, [], {}
    for name, t in named:
        first_name.setdefault(id(t), name)
        key = _storage_key(t)
        if key not in storage_ids:
            storage_ids[key] = len(storages)
            storages.append({"id": storage_ids[key], "nbytes": _storage_nbytes(t),
                             "device": str(t.device)})
    tensors = []
    for name, t in named:
        # ._base is the root tensor of a view (the same Python object, as PyTorch preserves it).
        base = t._base
        tensors.append({
            "name": name,
            "sizes": list(t.shape),
            "strides": list(t.stride()),
            "storage_offset": t.storage_offset(),
            "dtype": str(t.dtype).replace("torch.", ""),
            "storage": storage_ids[_storage_key(t)],
            "view_of": first_name.get(id(base)) if base is not None else None,
            "requires_grad": t.requires_grad,
            "is_leaf": t.is_leaf,
            "is_parameter": isinstance(t, nn.Parameter),
        })
    return {"format": FORMAT, "version": VERSION, "storages": storages, "tensors": tensors}


def to_text(description, metadata):
    """One storage and one tensor per line, as shardplan's describe_to_string writes them."""
    def lines(items):
        if not items:
            return "[]"
        return "[\n" + ",\n".join(json.dumps(i, separators=(",", ":")) for i in items) + "\n]"
    return ('{"format":%s,"version":%d,\n"metadata":%s,\n"storages":%s,\n"tensors":%s}\n' % (
        json.dumps(description["format"]), description["version"],
        json.dumps(metadata, separators=(",", ":"), sort_keys=True),
        lines(description["storages"]), lines(description["tensors"])))


def parameter_count(model):
    """PyTorch's own count: parameters() de-duplicates tied weights."""
    return sum(p.numel() for p in model.parameters())


def write_atomically(path, text):
    """Readers see the old file or the whole new one, never a partial one."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".tmp.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("model", nargs="?", choices=sorted(BUILTIN_MODELS),
                        help="a built-in model, built on the meta device")
    source.add_argument("--factory", metavar="MODULE:CALLABLE",
                        help="import MODULE and call CALLABLE() for an nn.Module (build it on meta)")
    parser.add_argument("-o", "--output", required=True, help="description file to write")
    args = parser.parse_args(argv)

    if args.factory:
        module_name, _, attr = args.factory.partition(":")
        if not attr:
            parser.error("--factory %r: expected MODULE:CALLABLE" % args.factory)
        model = getattr(importlib.import_module(module_name), attr)()
        expected, label = None, args.factory
    else:
        build, expected = BUILTIN_MODELS[args.model]
        model, label = build(), args.model
    if not isinstance(model, nn.Module):
        sys.exit("export_description: %s returned %s, expected an nn.Module" % (label, type(model)))

    named = named_tensors(model)
    description = describe(named)
    count = parameter_count(model)
    if expected is not None and count != expected:
        sys.exit("export_description: %s has %d parameters, expected the published %d"
                 % (label, count, expected))
    # Counted a second way for the built-in models, from the description: each parameter
    # storage's elements once (their parameters are whole storages; a tied weight shares its id).
    seen, described = set(), 0
    for t in description["tensors"]:
        if t["is_parameter"] and t["storage"] not in seen:
            seen.add(t["storage"])
            described += math.prod(t["sizes"])
    if expected is not None and described != count:
        sys.exit("export_description: the description holds %d parameter elements, "
                 "parameters() %d" % (described, count))
    metadata = {"generator": "scripts/export_description.py", "model": label,
                "torch": torch.__version__, "parameters": count}
    write_atomically(args.output, to_text(description, metadata))
    print("%s: %d tensors, %d storages, %d parameters -> %s" % (
        label, len(description["tensors"]), len(description["storages"]), count, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
