#!/usr/bin/env python3
"""Write the safetensors fixtures of tests/tensor/safetensors_test.cpp into tests/data/safetensors/.

Run:  /usr/bin/python3 scripts/gen_safetensors_fixtures.py [--out tests/data/safetensors]
Needs only the standard library: the `safetensors` package is not installed here, so the format is
written by hand from its specification (https://github.com/huggingface/safetensors, "Format"):
  8-byte little-endian u64 N | N bytes of JSON header | data buffer
with the header {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [b, e]}}
and offsets relative to the data buffer. As the reference writer does, tensors are laid out in
(dtype alignment desc, name) order and the header is padded with spaces to a multiple of 8 bytes.

Every tensor's bytes are the little-endian encoding (struct) of known values, and expected.json
lists, per file and tensor, the dtype, shape, absolute byte offset, byte count and the bytes as hex.
The C++ test reads the header with shardplan, then pread()s the byte range shardplan reports and
compares it with the hex: so the offsets are checked against an independent writer, not against
shardplan's own arithmetic. CI replays the checked-in files; this script is for regenerating them.

Files:
  tiny.safetensors                      one file, 6 tensors of 6 dtypes, __metadata__, a scalar and
                                        a zero-size tensor
  sharded/model.safetensors.index.json  an index over two shards (total_size = sum of bytes)
  sharded/model-0000{1,2}-of-00002.safetensors
  expected.json                         what the files hold, as computed here
  tiny-llama/{config.json,model.safetensors}
                                        a 2-layer Llama (GQA 4/2 heads) with Hugging Face's names and
                                        shapes (LlamaForCausalLM's state_dict, written out below):
                                        what `shardplan inspect --model/--checkpoint` must accept
  tiny-llama-bad/                       the same config over an index of two shards that does NOT
                                        fit it: lm_head.weight missing, an unexpected rotary inv_freq
                                        (older transformers saved it), layer 1's q_proj mis-shaped
  hostile/overlap.safetensors           two tensors whose data ranges overlap (must be refused)
"""
import argparse
import json
import os
import struct

# dtype -> (bytes per element, struct code or an encoder)
def bf16(x):
    # bfloat16 = the upper 16 bits of float32 (values below are exact in bf16, no rounding needed)
    return struct.pack("<f", x)[2:]

ENC = {
    "F32": (4, lambda x: struct.pack("<f", x)),
    "F16": (2, lambda x: struct.pack("<e", x)),
    "BF16": (2, bf16),
    "I64": (8, lambda x: struct.pack("<q", x)),
    "I32": (4, lambda x: struct.pack("<i", x)),
    "U8": (1, lambda x: struct.pack("<B", x)),
    "BOOL": (1, lambda x: struct.pack("<?", x)),
    "F64": (8, lambda x: struct.pack("<d", x)),
    "I8": (1, lambda x: struct.pack("<b", x)),
}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write_file(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, values)}; returns the expectation entries for the file."""
    # The reference writer orders by alignment (itemsize) descending, then name.
    order = sorted(tensors, key=lambda n: (-ENC[tensors[n][0]][0], n))
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in order:
        dtype, shape, values = tensors[name]
        assert len(values) == numel(shape), name
        blob = b"".join(ENC[dtype][1](v) for v in values)
        assert len(blob) == numel(shape) * ENC[dtype][0]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # pad: the data buffer starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    data_start = 8 + len(text)
    out = {}
    for name, blob in zip(order, blobs):
        b, e = header[name]["data_offsets"]
        out[name] = {"dtype": tensors[name][0], "shape": tensors[name][1],
                     "offset": data_start + b, "nbytes": e - b, "hex": blob.hex()}
    return {"header_bytes": len(text), "data_bytes": offset, "tensors": out}


# The tiny Llama of the CLI fixtures (tests/cli/cli_smoke.cmake). Parameters, by hand:
# embed 32*16 + per layer (q 16*16 + k 8*16 + v 8*16 + o 16*16 + 3 * 16*24 + 2 norms * 16) * 2
# + final norm 16 + lm_head 32*16 = 512 + 1952 * 2 + 16 + 512 = 4944.
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32,
    "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
    "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def llama_state_dict_shapes(c):
    """Names and shapes of transformers' LlamaForCausalLM.state_dict() for config c."""
    h, f, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    d = h // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    out = {"model.embed_tokens.weight": [V, h], "model.norm.weight": [h], "lm_head.weight": [V, h]}
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        out[p + "self_attn.q_proj.weight"] = [q, h]
        out[p + "self_attn.k_proj.weight"] = [kv, h]
        out[p + "self_attn.v_proj.weight"] = [kv, h]
        out[p + "self_attn.o_proj.weight"] = [h, q]
        out[p + "mlp.gate_proj.weight"] = [f, h]
        out[p + "mlp.up_proj.weight"] = [f, h]
        out[p + "mlp.down_proj.weight"] = [h, f]
        out[p + "input_layernorm.weight"] = [h]
        out[p + "post_attention_layernorm.weight"] = [h]
    return out


def write_tiny_llama(out):
    shapes = llama_state_dict_shapes(TINY_LLAMA)
    assert sum(numel(s) for s in shapes.values()) == 4944
    zeros = lambda s: ("BF16", s, [0.0] * numel(s))
    for folder in ("tiny-llama", "tiny-llama-bad"):
        os.makedirs(os.path.join(out, folder), exist_ok=True)
        with open(os.path.join(out, folder, "config.json"), "w") as f:
            json.dump(TINY_LLAMA, f, indent=2)
            f.write("\n")
    write_file(os.path.join(out, "tiny-llama", "model.safetensors"),
               {n: zeros(s) for n, s in shapes.items()}, metadata={"format": "pt"})

    bad = {n: zeros(s) for n, s in shapes.items() if n != "lm_head.weight"}
    bad["model.layers.1.self_attn.q_proj.weight"] = zeros([8, 16])
    bad["model.layers.0.self_attn.rotary_emb.inv_freq"] = ("F32", [2], [1.0, 0.01])
    names = sorted(bad)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map, total = {}, 0
    for file, members in halves.items():
        exp = write_file(os.path.join(out, "tiny-llama-bad", file), {n: bad[n] for n in members},
                         metadata={"format": "pt"})
        total += exp["data_bytes"]
        weight_map.update({n: file for n in members})
    with open(os.path.join(out, "tiny-llama-bad", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")


def write_hostile(out):
    """Files the reader must refuse; written byte by byte since write_file only writes valid ones."""
    os.makedirs(os.path.join(out, "hostile"), exist_ok=True)
    # Two F32 [2] tensors, 8 bytes each, in a 12-byte buffer: b's [4, 12) overlaps a's [0, 8).
    header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    with open(os.path.join(out, "hostile", "overlap.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(12))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                  "safetensors"))
    out = ap.parse_args().out
    os.makedirs(os.path.join(out, "sharded"), exist_ok=True)
    expected = {"generator": "scripts/gen_safetensors_fixtures.py", "files": {}}

    expected["files"]["tiny.safetensors"] = write_file(
        os.path.join(out, "tiny.safetensors"),
        {
            "embed.weight": ("BF16", [3, 2], [1.0, -2.0, 0.5, 3.0, -0.25, 8.0]),
            "norm.weight": ("F32", [2], [1.5, -1.0]),
            "head.bias": ("F16", [3], [0.5, 2.0, -4.0]),
            "step": ("I64", [], [7]),
            "mask": ("BOOL", [2, 2], [True, False, False, True]),
            "empty": ("F32", [0, 4], []),
        },
        metadata={"format": "pt", "note": "shardplan fixture"},
    )

    shards = {
        "model-00001-of-00002.safetensors": {
            "model.embed.weight": ("F32", [4, 2], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
            "model.layers.0.w": ("F16", [2, 2], [1.0, 2.0, 3.0, 4.0]),
        },
        "model-00002-of-00002.safetensors": {
            "model.layers.1.w": ("F16", [2, 2], [-1.0, -2.0, -3.0, -4.0]),
            "model.norm.weight": ("F32", [2], [1.0, 1.0]),
            "lm_head.weight": ("I8", [4, 2], [1, -1, 2, -2, 3, -3, 4, -4]),
        },
    }
    weight_map, total = {}, 0
    for file, tensors in shards.items():
        exp = write_file(os.path.join(out, "sharded", file), tensors, metadata={"format": "pt"})
        expected["files"]["sharded/" + file] = exp
        total += exp["data_bytes"]
        for name in tensors:
            weight_map[name] = file
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    expected["total_size"] = total
    write_tiny_llama(out)
    write_hostile(out)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
