#include "planner/cli/plan_args.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "base/error.h"
#include "collectives/cluster.h"
#include "collectives/rank_placement.h"
#include "planner/candidate/candidate_mesh.h"
#include "planner/cli/byte_size.h"
#include "planner/cli/cli_common.h"
#include "tensor/models/family.h"
#include "tensor/models/model_config.h"

namespace shardplan::cli {
namespace {

std::optional<int64_t> pin(int64_t v) { return v > 0 ? std::optional<int64_t>(v) : std::nullopt; }

}  // namespace

planner::Pins PlanArgs::pins() const {
  planner::Pins p;
  const auto dims = planner::parallel_dims();
  for (size_t i = 0; i < dims.size(); ++i) p.*dims[i].pin = pin(degrees[i]);
  p.etp = pin(etp);
  p.micro_batch = pin(micro_batch);
  p.virtual_stages = pin(virtual_stages);
  p.recompute_layers = pin(recompute_layers);
  if (zero >= 0) p.zero = zero;
  if (!recompute.empty()) p.recompute = tensor::parse_recompute_policy(recompute);
  if (!sequence_parallel.empty()) {
    SP_CHECK(sequence_parallel == "on" || sequence_parallel == "off", "--sequence-parallel '",
             sequence_parallel, "', expected on or off");
    p.sequence_parallel = sequence_parallel == "on";
  }
  return p;
}

std::unique_ptr<planner::Planner> PlanArgs::planner() const {
  tensor::ModelConfig cfg = tensor::find_model_config(model);
  // Once per command, though compare builds a planner per strategy and cluster.
  const std::string multimodal = tensor::multimodal_note(cfg);
  // Note [Long context by RoPE scaling]: a sequence beyond the config's positions is trained by
  // scaling the rotary embedding (Llama 3.1: factor 8 over 8,192 positions; Chen et al. 2023,
  // position interpolation). Positions carry no parameters, so the planned model is the config's
  // with max_position_embeddings raised to --seq; its attention and activations are priced at
  // that length. Allowed when the config already scales RoPE or --rope-scaling says so, with a
  // note; refused otherwise, naming the flag. A learned position table (GPT-2, OPT, StarCoder)
  // has no row past its last: refused, whatever the flags. ALiBi (BLOOM, MPT; no rotary and no
  // table) biases scores by distance with no limit (Press et al. 2022 train short and test
  // long), and XGLM's fixed sinusoids are a buffer transformers regrows to any length: both
  // planned at --seq with a note, nothing scaled.
  // Printed once the planner has accepted the job: a refusal is one line, never a note before it.
  std::string position_note;
  if (seq > cfg.max_position_embeddings && cfg.max_position_embeddings > 0) {
    const tensor::ModelFamily& family = tensor::family_of(cfg);
    SP_CHECK(!family.learned_positions, "--seq ", seq, " is longer than ", model, "'s ",
             cfg.max_position_embeddings,
             " learned positions (a table of max_position_embeddings rows), expected at most ",
             cfg.max_position_embeddings);
    if (!family.rotary) {
      position_note = ("note: --seq " + std::to_string(seq) + " is beyond the " +
                       std::to_string(cfg.max_position_embeddings) + " positions " + model +
                       " was configured for: it has no learned position table or rotation (ALiBi, "
                       "fixed sinusoids or no positional encoding), planned at " +
                       std::to_string(seq) + " tokens");
      cfg.max_position_embeddings = seq;
    } else {
      SP_CHECK(cfg.rope_scaling || rope_scaling, "--seq ", seq, " is longer than ", model, "'s ",
               cfg.max_position_embeddings,
               " positions (max_position_embeddings), expected at most ",
               cfg.max_position_embeddings,
               ", or --rope-scaling to train that context by scaling its rotary embedding");
      const double factor =
          static_cast<double>(seq) / static_cast<double>(cfg.max_position_embeddings);
      position_note = ("note: --seq " + std::to_string(seq) + " is beyond " + model + "'s " +
                       std::to_string(cfg.max_position_embeddings) +
                       " positions: planned with its rotary embedding scaled by " +
                       std::to_string(factor).substr(0, 5) +
                       "x (no new parameters; attention and activations at " + std::to_string(seq) +
                       " tokens)");
      if (!cfg.rope_scaling) cfg.rope_scaling = tensor::RopeScaling{"linear", factor, {}, {}, {}};
      cfg.max_position_embeddings = seq;
    }
  }
  collectives::Cluster cluster =
      collectives::load_cluster(collectives::resolve_cluster(where.cluster));
  planner::PlannerOptions o;
  o.precision = planner::parse_precision(precision);
  o.attention = tensor::parse_attention_impl(attention_for(cfg));
  SP_CHECK(moe_imbalance == 1 || cfg.num_local_experts > 0, "--moe-imbalance ", moe_imbalance, ": ",
           model, " has no routed experts, expected 1 or an MoE model");
  o.moe_imbalance = moe_imbalance;
  if (!memory_headroom.empty()) {
    o.memory_headroom_bytes = parse_byte_size(memory_headroom, "--memory-headroom");
  }
  o.stack =
      stack.empty() ? planner::default_stack() : planner::load_stack(planner::resolve_stack(stack));
  // A progress line on a terminal once the search has run a second; never in a pipe or a file.
  if (isatty(STDERR_FILENO) != 0) {
    auto drawn = std::make_shared<bool>(false);
    o.progress = [drawn](int64_t evaluated, double seconds) {
      if (evaluated < 0) {
        if (*drawn) std::fputs("\r\033[K", stderr);  // erase the line
        *drawn = false;
      } else if (seconds >= 1) {
        std::fprintf(stderr, "\rsearching: %lld configurations, %.1f s",
                     static_cast<long long>(evaluated), seconds);
        *drawn = true;
      }
    };
  }
  auto made = std::make_unique<planner::Planner>(
      std::move(cfg), std::move(cluster),
      planner::TrainingSetup{.gpus = where.gpus, .seq = seq, .global_batch = global_batch}, o);
  // The notes wait for the planner's acceptance: a refused job prints its one error line alone.
  if (!multimodal.empty() && !noted_multimodal_) {
    print_error_line("note: " + model + ": " + multimodal);
    noted_multimodal_ = true;
  }
  if (!position_note.empty()) print_error_line(position_note);
  return made;
}

// Note [Attention sinks]
// GPT-OSS adds a learned logit per head to the softmax's denominator. No flash kernel computes
// it in training: FlashAttention-2 and -3 have no sink; TransformerEngine turns FlashAttention
// off for any softmax but the vanilla one, and cuDNN's fused attention takes a learnable softmax
// only from cuDNN 9.18, which the NeMo containers of early 2026 did not ship (verl-project/verl
// #5224; radixark/miles#1917: TE 2.17 leaves UnfusedDotProductAttention the only backend). Such
// a model is priced with the unfused (math) attention unless --attention says otherwise (a stack
// with a newer cuDNN: --attention flash). Megatron-Bridge's GPT-OSS-120B row on 64 H100s was
// priced 107 % fast with the fused kernel.
std::string PlanArgs::attention_for(const tensor::ModelConfig& model) const {
  if (!attention.empty()) return attention;
  if (tensor::family_of(model).attention_sinks) return "math";
  return model.attn_implementation == "eager" ? "math" : "flash";
}

void add_plan_options(CLI::App& cmd, PlanArgs& a, bool sweep) {
  cmd.add_option("--model", a.model, "Model: configs/models name, config.json or its folder")
      ->required()
      ->type_name("NAME|PATH");
  CLI::Option* cluster =
      cmd.add_option("--cluster", a.where.cluster, "Cluster (configs/clusters name or path)")
          ->type_name("NAME|PATH");
  CLI::Option* clusters = nullptr;
  if (sweep) {
    clusters = cmd.add_option("--clusters", a.clusters,
                              "Clusters to compare the job on, comma-separated (names or paths)")
                   ->delimiter(',')
                   ->type_name("A,B,...");
    cluster->excludes(clusters);
    cmd.add_option("--gpus", a.gpus_list, "GPUs (ranks) in the job, or a comma list to sweep")
        ->required()
        ->delimiter(',')
        ->transform(positive_count("GPUs"))
        ->type_name("N[,N...]");
  } else {
    cluster->required();
    cmd.add_option("--gpus", a.where.gpus, "GPUs (ranks) in the job (16k = 16384)")
        ->required()
        ->transform(positive_count("GPUs"))
        ->type_name("N");
  }
  cmd.add_option("--seq", a.seq, "Sequence length in tokens (4k = 4096)")
      ->required()
      ->transform(positive_count("tokens"))
      ->type_name("S");
  CLI::Option* batch =
      cmd.add_option("--global-batch", a.global_batch, "Sequences per optimizer step (1k = 1024)")
          ->transform(positive_count("sequences"))
          ->type_name("B");
  CLI::Option* tokens =
      cmd.add_option("--global-batch-tokens", a.global_batch_tokens,
                     "Tokens per optimizer step instead of --global-batch (4M = 4,194,304 "
                     "tokens = 1,024 sequences of 4k); a multiple of --seq")
          ->transform(positive_count("tokens"))
          ->type_name("T");
  batch->excludes(tokens);
  // One of the two, resolved to sequences once the whole line is parsed.
  cmd.parse_complete_callback([&a, batch, tokens, cluster, clusters] {
    if (clusters != nullptr) {
      SP_CHECK(cluster->count() + clusters->count() > 0,
               "--cluster is required (or --clusters A,B,... to compare several)");
      a.clusters_given = clusters->count() > 0;
      if (a.clusters.empty()) a.clusters = {a.where.cluster};
      a.where.cluster = a.clusters.front();
      a.where.gpus = a.gpus_list.front();
    }
    SP_CHECK(batch->count() + tokens->count() > 0,
             "--global-batch is required (sequences per step), or --global-batch-tokens");
    if (tokens->count() == 0) return;
    SP_CHECK(a.global_batch_tokens % a.seq == 0, "--global-batch-tokens ", a.global_batch_tokens,
             " is not a multiple of --seq ", a.seq, ", expected whole sequences (",
             a.global_batch_tokens / a.seq * a.seq, " or ",
             (a.global_batch_tokens / a.seq + 1) * a.seq, ")");
    a.global_batch = a.global_batch_tokens / a.seq;
  });
  const auto dims = planner::parallel_dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    cmd.add_option(std::string(dims[i].flag), a.degrees[i], std::string(dims[i].help))
        ->transform(positive_count(std::string(dims[i].unit)))
        ->type_name("N");
  }
  cmd.add_option("--etp", a.etp,
                 "Pin expert tensor parallelism (MoE): 1 keeps experts whole (ep may then span "
                 "tp x dp ranks), or --tp to split them like the dense layers")
      ->transform(positive_count("ranks"))
      ->type_name("N");
  cmd.add_option("--zero", a.zero, "Pin the ZeRO stage over dp: 0, 1, 2 or 3 (FSDP)")
      ->check(count_in(0, 3, "the ZeRO stage"))
      ->type_name("0|1|2|3");
  cmd.add_option("--micro-batch", a.micro_batch, "Pin the micro-batch size")
      ->transform(positive_count("sequences"))
      ->type_name("N");
  cmd.add_option("--recompute", a.recompute, "Pin recomputation: none, selective or full")
      ->check(non_empty("none, selective or full"))
      ->type_name("POLICY");
  cmd.add_option("--recompute-layers", a.recompute_layers,
                 "Pin partial recomputation: the first N layers of each model chunk recomputed "
                 "in full, the rest keeping their activations (implies --recompute full)")
      ->transform(positive_count("layers"))
      ->type_name("N");
  cmd.add_option("--virtual-stages", a.virtual_stages,
                 "Pin model chunks per pipeline rank (1 = plain 1F1B, > 1 interleaved)")
      ->transform(positive_count("chunks"))
      ->type_name("V");
  cmd.add_option("--sequence-parallel", a.sequence_parallel, "Pin sequence parallelism: on or off")
      ->check(non_empty("on or off"))
      ->type_name("on|off");
  cmd.add_option("--precision", a.precision,
                 "bf16, or fp8 (GEMMs at the FP8 peak, the rest in bf16); default bf16")
      ->type_name("bf16|fp8");
  cmd.add_option("--attention", a.attention,
                 "Attention kernels: flash or math (scores materialized); default: the model "
                 "config's attn_implementation (eager: math), else flash")
      ->check(non_empty("flash or math"))
      ->type_name("flash|math");
  cmd.add_option("--stack", a.stack,
                 "Software stack the plan is for (configs/stacks name or path): megatron (the "
                 "default), megatron-2021, torchtitan, torchtitan-compile, deepspeed, pytorch")
      ->check(non_empty("a configs/stacks name or a stack file"))
      ->type_name("NAME|PATH");
  cmd.add_option("--moe-imbalance", a.moe_imbalance,
                 "MoE routing imbalance: the busiest expert's tokens over the balanced load "
                 "(scales its GEMMs and the all-to-all); default 1, the force-balanced routing "
                 "of published benchmarks")
      ->check(number_in(1.0, 1000.0, "the busiest expert's load over the balanced one"))
      ->type_name("F");
  cmd.add_flag("--rope-scaling", a.rope_scaling,
               "Allow --seq beyond the model's positions, trained by scaling its rotary "
               "embedding (implied when the config already scales it)");
  cmd.add_option("--memory-headroom", a.memory_headroom,
                 "Memory per GPU a plan must leave free below the device's (the allocator's "
                 "fragmentation, framework buffers): 4GiB, 500MB, ...; default 0")
      ->check(non_empty("a size such as 4GiB or 0"))
      ->type_name("SIZE");
}

namespace {

// The nodes the planner priced the job on (Note [Even nodes] in collectives/rank_placement.h).
collectives::RankPlacement job_placement(const PlanArgs& a, const planner::Planner& p) {
  return collectives::place_evenly(p.cluster(), a.where.gpus);
}

}  // namespace

nlohmann::ordered_json setup_json(const PlanArgs& a, const planner::Planner& p) {
  nlohmann::ordered_json j = {{"model", a.model},
                              {"cluster", a.where.cluster},
                              {"gpus", a.where.gpus},
                              {"seq", a.seq},
                              {"global_batch", a.global_batch},
                              {"precision", a.precision},
                              {"stack", p.options().stack.name},
                              {"attention", tensor::to_string(p.options().attention)}};
  const collectives::RankPlacement placed = job_placement(a, p);
  if (collectives::fills_no_whole_node(p.cluster(), placed)) {
    j["nodes"] = placed.nodes;
    j["gpus_per_node"] = placed.ranks_per_node;
  }
  // Only when asked for: balanced routing is the default every other output assumes.
  if (p.options().moe_imbalance != 1) j["moe_imbalance"] = p.options().moe_imbalance;
  if (p.options().memory_headroom_bytes != 0) {
    j["memory_headroom_bytes"] = p.options().memory_headroom_bytes;
  }
  return j;
}

std::string gpus_text(const PlanArgs& a, const planner::Planner& p) {
  const std::string uneven = collectives::uneven_nodes_text(p.cluster(), job_placement(a, p));
  return std::to_string(a.where.gpus) + " x " + p.cluster().accelerator.model +
         (uneven.empty() ? "" : ", " + uneven);
}

}  // namespace shardplan::cli
