# Builds each config.json-like file of a folder with Hugging Face transformers on the meta device and writes,
# per file, the total parameter count (model.parameters(), tied weights once) and every parameter's name and
# shape. Run where transformers is installed (the GPU machine has it; this one does not):
#   python3 scripts/gen_hf_families_oracle.py tests/data/hf_families/configs \
#       tests/data/hf_families/hf_params.json --names
# tests/tensor/models/hf_families_test.cpp replays what it wrote (transformers 5.17, torch 2.x).
import json, os, sys, torch, transformers
from transformers import AutoConfig, AutoModelForCausalLM
src, out = sys.argv[1], sys.argv[2]; names = '--names' in sys.argv
res = {"transformers": transformers.__version__, "torch": torch.__version__, "models": {}}
for f in sorted(os.listdir(src)):
    if not f.endswith('.json') or f.startswith('expected'): continue
    d = json.load(open(os.path.join(src, f)))
    try:
        cfg = AutoConfig.for_model(d.pop('model_type'), **{k: v for k, v in d.items() if k != 'architectures'})
        with torch.device('meta'):
            m = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
        entry = {"class": type(m).__name__, "total": sum(p.numel() for p in m.parameters())}
        if names: entry["params"] = [[n, list(p.shape)] for n, p in m.named_parameters()]
        res["models"][f[:-5]] = entry
        print(f"{f[:-5]:28s} {entry['class']:32s} {entry['total']:>18,}", flush=True)
    except Exception as e:
        res["models"][f[:-5]] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        print(f"{f[:-5]:28s} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
json.dump(res, open(out, 'w'), indent=1)
