// A torchtitan TOML job config for a plan (Note [Export is exact or refused] in plan_export.h;
// sections and keys are those of tests/data/frameworks/torchtitan_job_config.json: the last
// torchtitan commit that reads TOML).
#include <sstream>

#include "base/error.h"
#include "planner/plan/plan_export.h"
#include "tensor/training.h"

namespace shardplan::planner {
namespace {

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// torchtitan's llama3 flavors by shape (its model registry names them by size).
std::string llama3_flavor(const tensor::ModelConfig& m) {
  if (m.model_type != "llama" || m.vocab_size != 128256) return "";
  if (m.hidden_size == 4096 && m.num_hidden_layers == 32) return "8B";
  if (m.hidden_size == 8192 && m.num_hidden_layers == 80) return "70B";
  if (m.hidden_size == 16384 && m.num_hidden_layers == 126) return "405B";
  return "";
}

// [[parallelism.module_fqns_per_model_part]]: each virtual stage's modules in order, the
// embedding with the first and the final norm and output layer with the last.
std::string model_parts(const PlanFile& p) {
  const std::vector<int64_t> chunks = virtual_stage_layers(p);
  std::ostringstream os;
  os << "module_fqns_per_model_part = [";
  int64_t layer = 0;
  for (size_t k = 0; k < chunks.size(); ++k) {
    os << (k ? ", " : "") << "[";
    bool first = true;
    const auto name = [&](const std::string& n) {
      os << (first ? "" : ", ") << quoted(n);
      first = false;
    };
    if (k == 0) name("tok_embeddings");
    for (int64_t i = 0; i < chunks[k]; ++i) name("layers." + std::to_string(layer++));
    if (k + 1 == chunks.size()) {
      name("norm");
      name("output");
    }
    os << "]";
  }
  os << "]\n";
  return os.str();
}

}  // namespace

FrameworkExport export_torchtitan(const PlanFile& p, const ExportOptions& o) {
  const ParallelConfig& c = p.config;
  SP_CHECK(c.zero != 1,
           "torchtitan has no ZeRO-1 (its FSDP shards parameters and gradients "
           "too): the plan has zero 1, expected a plan made with --stack torchtitan "
           "(zero 0, 2 or 3) or export --to megatron");
  SP_CHECK(c.recompute_layers == 0,
           "torchtitan's activation checkpointing covers every layer or none (mode full or "
           "selective): the plan recomputes the first ",
           c.recompute_layers,
           " layers of each chunk, expected a plan with --recompute full, "
           "selective or none, or export --to megatron (--recompute-method block)");
  SP_CHECK(p.model.mtp_layers == 0,
           "torchtitan's TOML has no multi-token prediction modules: ", p.model_name, " has ",
           p.model.mtp_layers, ", expected export --to megatron");
  FrameworkExport e;
  e.launch = launch_line(p, o.launcher, "-m torchtitan.train --job.config_file " + o.config_path);
  std::ostringstream t;
  t << "# torchtitan job config for " << p.model_name << " on " << p.setup.gpus << " x "
    << p.cluster.accelerator.model << " (" << p.cluster.name
    << "), written by shardplan export from a plan for the " << p.stack << " stack\n"
    << "# launch: " << e.launch << "\n";
  const std::string flavor = llama3_flavor(p.model);
  t << "\n[model]\n";
  if (flavor.empty()) {
    e.notes.push_back("set [model] name and flavor to torchtitan's entry for " + p.model_name +
                      " (and hf_assets_path for its tokenizer)");
    t << "# " << e.notes.back() << "\n";
  } else {
    t << "name = \"llama3\"\nflavor = " << quoted(flavor) << "\n";
    e.notes.push_back("set [model] hf_assets_path to the model's tokenizer and [training] dataset");
    t << "# " << e.notes.back() << "\n";
  }
  if (c.precision == Precision::kFp8) t << "converters = [\"quantize.linear.float8\"]\n";
  // torchtitan's local batch is what a data-parallel rank runs at once: the pipeline's whole
  // share, cut into micro-batches by the schedule, or without pipelining one micro-batch, the
  // global batch then accumulating over global / (local x dp) steps.
  t << "\n[training]\n"
    << "global_batch_size = " << p.setup.global_batch << "\n"
    << "local_batch_size = " << (c.pp > 1 ? p.setup.global_batch / c.dp : c.micro_batch) << "\n"
    << "seq_len = " << p.setup.seq << "\n";
  t << "\n[parallelism]\n";
  if (c.zero == 0) {
    t << "data_parallel_replicate_degree = " << c.dp << "\ndata_parallel_shard_degree = 1\n";
  } else {
    // FSDP2: zero 3 reshards after forward, zero 2 keeps the gathered parameters until backward.
    t << "data_parallel_replicate_degree = 1\ndata_parallel_shard_degree = " << c.dp << "\n"
      << "fsdp_reshard_after_forward = " << (c.zero == 3 ? "\"always\"" : "\"never\"") << "\n";
  }
  t << "tensor_parallel_degree = " << c.tp << "\n"
    << "context_parallel_degree = " << c.cp << "\n"
    << "pipeline_parallel_degree = " << c.pp << "\n";
  if (c.pp > 1) {
    t << "pipeline_parallel_schedule = "
      << (c.virtual_stages > 1 ? "\"Interleaved1F1B\"" : "\"1F1B\"")
      << "\npipeline_parallel_microbatch_size = " << c.micro_batch << "\n"
      << model_parts(p);
  }
  if (p.model.num_local_experts > 0) {
    t << "expert_parallel_degree = " << c.ep << "\n"
      << "expert_tensor_parallel_degree = " << (c.etp > 0 ? c.etp : c.tp) << "\n";
  }
  // torchtitan applies sequence parallelism with every TP plan (it has no switch for it).
  if (c.tp > 1 && !c.sequence_parallel) {
    e.notes.push_back(
        "torchtitan's TP plans always shard the sequence between blocks; the plan "
        "priced tp without sequence parallelism");
    t << "# " << e.notes.back() << "\n";
  }
  t << "\n[activation_checkpoint]\nmode = "
    << (c.recompute == tensor::RecomputePolicy::kFull ? "\"full\""
        : c.recompute == tensor::RecomputePolicy::kSelective
            ? "\"selective\"\nselective_ac_option = \"op\""
            : "\"none\"")
    << "\n";
  if (p.stack == "torchtitan-compile") {
    t << "\n[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n";
  }
  if (c.precision == Precision::kFp8) {
    t << "\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n";
  }
  e.config = t.str();
  return e;
}

}  // namespace shardplan::planner
