#include "planner/plan/plan_file.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/limits.h"
#include "base/sha256.h"
#include "base/strict_json.h"
#include "collectives/rank_placement.h"
#include "mesh/parallel_style.h"
#include "planner/candidate/candidate_mesh.h"
#include "planner/cost/tensor_parallel.h"
#include "planner/plan/plan_view.h"
#include "tensor/layers.h"
#include "tensor/models/family.h"
#include "tensor/models/models.h"
#include "tensor/module.h"

namespace shardplan::planner {
namespace {

// Every parameter of the model with the placements configuration `c` gives it.
std::vector<PlanParameter> placed_parameters(const tensor::ModelConfig& model,
                                             const ParallelConfig& c,
                                             const std::vector<int64_t>& stage_layers) {
  const tensor::ModulePtr m = tensor::build_model(model);
  const mesh::DeviceMesh dm(mesh_shape_vector(c), mesh_names());
  mesh::ParallelizeConfig pc;
  std::vector<mesh::StyleRule> rules;
  const bool whole_experts = expert_tp(c) != c.tp;  // etp = 1 < tp (Note [Expert fold])
  if (c.tp > 1) {
    rules = tensor_parallel_rules(tensor::family_of(model), *m);
    if (whole_experts) {
      // The routed experts go whole; shared experts (GroupedExperts::shared, Inkling's) keep
      // their split of F.
      std::erase_if(rules, [&](const mesh::StyleRule& r) {
        if (r.style != mesh::ParallelStyle::kExperts) return false;
        for (const tensor::NamedModule& nm : m->named_modules()) {
          const auto* e = dynamic_cast<const tensor::GroupedExperts*>(nm.module);
          if (e != nullptr && e->shared() && mesh::fqn_matches(r.pattern, nm.name)) return false;
        }
        return true;
      });
    }
    pc.tp_dim = dim_name(kTpDim);
  }
  const std::array<int64_t, kMeshDims> shape = mesh_shape(c);
  // ZeRO-3 shards a dense weight over the whole data-parallel group (the dp, ep and cp mesh dims)
  // and an expert over its replicas (the dp mesh dim; Note [Expert and dense data parallelism]).
  if (c.zero == 3) {
    for (MeshDim d : {kDpDim, kEpDim, kCpDim}) {
      if (shape[d] > 1) pc.fsdp_dims.push_back(dim_name(d));
    }
  }
  // The routed experts' dim 0: over the ep mesh dim, the cp one, then the tp one when experts are
  // whole (Note [Expert fold]).
  if (c.ep > 1) {
    for (MeshDim d : {kEpDim, kCpDim}) {
      if (shape[d] > 1) pc.ep_dims.push_back(dim_name(d));
    }
    if (whole_experts) pc.ep_dims.push_back(dim_name(kTpDim));
  }
  const std::vector<mesh::ParameterSharding> shardings =
      mesh::parallelize_module(*m, dm, rules, pc);
  ParameterStage stage_of(model, StagePartition::from_counts(stage_layers, c.virtual_stages));
  std::vector<PlanParameter> out;
  for (const mesh::ParameterSharding& s : shardings) {
    PlanParameter p;
    p.name = s.fqn;
    p.shape.assign(s.spec.shape.begin(), s.spec.shape.end());
    p.dtype = s.spec.dtype;
    p.placements = s.spec.placements;
    p.style = s.style;
    p.stage = stage_of(s.fqn);
    out.push_back(std::move(p));
  }
  return out;
}

// "gpt2: 12 layers, hidden 768, vocab 50257": enough to tell two models apart in a message.
std::string model_summary(const tensor::ModelConfig& c) {
  std::string s = c.model_type + ": " + std::to_string(c.num_hidden_layers) + " layers, hidden " +
                  std::to_string(c.hidden_size) + ", vocab " + std::to_string(c.vocab_size);
  if (c.num_local_experts > 0) s += ", " + std::to_string(c.num_local_experts) + " experts";
  return s;
}

// "H100 SXM5 80 GB, 8 per node": the same for a cluster.
std::string cluster_summary(const collectives::Cluster& c) {
  return c.accelerator.model + ", " + std::to_string(collectives::gpus_per_node(c)) + " per node";
}

nlohmann::json plain(const nlohmann::ordered_json& j) { return nlohmann::json::parse(j.dump()); }

std::string difference_text(const nlohmann::json& given, const nlohmann::json& planned) {
  const std::optional<JsonDifference> d = first_json_difference(given, planned);
  if (!d) return "";
  return ": " + (d->path.empty() ? std::string("the value") : "'" + d->path + "'") + " is " +
         d->left + " there, " + d->right + " in the plan";
}

DimOrder parse_dim_order(std::string_view s) {
  for (DimOrder o : {DimOrder::kTpInner, DimOrder::kCpInner}) {
    if (to_string(o) == s) return o;
  }
  throw Error("unknown dim order '" + std::string(s) + "', expected tp-inner or cp-inner");
}

}  // namespace

nlohmann::ordered_json config_json(const ParallelConfig& c) {
  nlohmann::ordered_json j;
  for (const ParallelDim& d : parallel_dims()) j[std::string(d.name)] = c.*d.degree;
  // Expert tensor parallelism only where it differs from tp (Note [Expert fold]).
  if (c.etp > 0 && c.etp != c.tp) j["etp"] = c.etp;
  nlohmann::ordered_json rest = {{"zero", c.zero},
                                 {"micro_batch", c.micro_batch},
                                 {"recompute", tensor::to_string(c.recompute)},
                                 {"recompute_layers", c.recompute_layers},
                                 {"virtual_stages", c.virtual_stages},
                                 {"sequence_parallel", c.sequence_parallel},
                                 {"precision", to_string(c.precision)}};
  j.update(rest);
  return j;
}

std::vector<int64_t> PlanFile::mesh_shape() const { return mesh_shape_vector(config); }

PlanFile plan_file(Planner& p, const PlanResult& r, std::string_view model_name, int64_t seed) {
  PlanFile f;
  f.model_name = model_name;
  f.model = p.model();
  f.cluster = p.cluster();
  f.setup = p.setup();
  f.stack = p.options().stack.name;
  f.order = r.order;
  f.config = r.config;
  f.stage_layers = partition_from_ends(f.model.num_hidden_layers, r.config.pp, r.stages).counts();
  f.seed = seed;
  f.parameters = placed_parameters(f.model, f.config, f.stage_layers);
  f.step_time_s = r.step_time_s;
  f.mfu = r.mfu;
  f.tokens_per_s = r.tokens_per_s;
  f.memory_per_gpu_bytes = r.memory_bytes;
  Bill bill;
  (void)p.estimate(r.config, r.order, &bill);
  f.stage_states = bill.stage_states;
  f.collectives = bill.collectives;
  f.recipe = p.context().recipe;
  return f;
}

nlohmann::ordered_json plan_to_json(const PlanFile& f) {
  nlohmann::ordered_json j;
  j["format"] = kPlanFormat;
  j["version"] = kPlanVersion;
  const nlohmann::json config = tensor::to_hf_json(f.model);
  j["model"] = {
      {"name", f.model_name}, {"config", config}, {"sha256", model_sha256(f.model_name, config)}};
  const nlohmann::ordered_json facts = collectives::cluster_to_json(f.cluster);
  j["cluster"] = {{"name", f.cluster.name},
                  {"facts", facts},
                  {"sha256", cluster_sha256(f.cluster.name, plain(facts))}};
  j["setup"] = {{"gpus", f.setup.gpus},
                {"seq", f.setup.seq},
                {"global_batch", f.setup.global_batch},
                {"stack", f.stack}};
  j["mesh"] = {{"shape", f.mesh_shape()}, {"names", mesh_names()}};
  j["dim_order"] = to_string(f.order);
  j["config"] = config_json(f.config);
  j["stage_layers"] = f.stage_layers;
  j["seed"] = f.seed;
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (const PlanParameter& p : f.parameters) {
    nlohmann::ordered_json pl = nlohmann::ordered_json::array();
    for (const mesh::Placement& x : p.placements) pl.push_back(mesh::to_string(x));
    params.push_back({{"name", p.name},
                      {"shape", p.shape},
                      {"dtype", tensor::dtype_name(p.dtype)},
                      {"placements", pl},
                      {"style", p.style},
                      {"stage", p.stage}});
  }
  j["parameters"] = params;
  j["prediction"] = {{"step_time_s", f.step_time_s},
                     {"mfu", f.mfu},
                     {"tokens_per_s", f.tokens_per_s},
                     {"memory_per_gpu_bytes", f.memory_per_gpu_bytes}};
  // Written when known, so that a plan read without it writes back the same document.
  if (!f.stage_states.empty()) {
    nlohmann::ordered_json states = nlohmann::ordered_json::array();
    for (const StageStateBytes& b : f.stage_states) {
      states.push_back(
          {{"parameters", b.parameters}, {"gradients", b.gradients}, {"optimizer", b.optimizer}});
    }
    j["prediction"]["model_state_per_stage_bytes"] = states;
  }
  if (!f.collectives.empty()) {
    nlohmann::ordered_json cs = nlohmann::ordered_json::array();
    for (const BillCollective& c : f.collectives) cs.push_back(collective_json(c));
    j["prediction"]["collectives"] = cs;
  }
  if (f.recipe) {
    j["prediction"]["bytes_per_parameter"] = {
        {"weights", f.recipe->param_bytes},
        {"gradients", f.recipe->grad_bytes},
        {"master_weights", f.recipe->master_bytes},
        {"optimizer_states", f.recipe->optimizer_state_bytes}};
  }
  return j;
}

PlanFile plan_from_json(const nlohmann::json& j, std::string_view origin_view) {
  const std::string origin(origin_view);
  JsonFields doc(j, origin);
  if (doc.str("format") != kPlanFormat) {
    doc.fail("format", "expected \"" + std::string(kPlanFormat) + "\"");
  }
  const int64_t version = doc.integer("version", 1);
  if (version != kPlanVersion) {
    doc.fail("version",
             version < kPlanVersion
                 ? std::to_string(version) +
                       " was written by an older shardplan (before plans "
                       "embedded their cluster), expected " +
                       std::to_string(kPlanVersion) + ": run shardplan plan ... --out again"
                 : std::to_string(version) + " is newer than this shardplan reads, expected " +
                       std::to_string(kPlanVersion));
  }
  PlanFile f;
  {
    JsonFields m = doc.object("model");
    f.model_name = m.line("name");
    if (static_cast<int64_t>(f.model_name.size()) > kMaxNameBytes) {
      m.fail("name", std::to_string(f.model_name.size()) + " bytes ('" +
                         printable(f.model_name, 40) + "'), expected a name or path of at most " +
                         std::to_string(kMaxNameBytes));
    }
    const nlohmann::json& cfg = m.get("config");
    const std::string sha = m.str("sha256");
    try {
      f.model = tensor::parse_model_config(cfg, origin + " model.config");
    } catch (const Error& e) {
      m.fail("config", e.what());
    }
    m.done();
    if (sha != model_sha256(f.model_name, cfg)) {
      m.fail("sha256", "does not match model.name '" + printable(f.model_name, 80) +
                           "' and model.config (" + model_summary(f.model) +
                           "): the model was edited after planning, expected the model this plan "
                           "was made for (plan again for another model)");
    }
  }
  {
    JsonFields c = doc.object("cluster");
    const std::string name = c.line("name");
    if (static_cast<int64_t>(name.size()) > kMaxNameBytes) {
      c.fail("name", std::to_string(name.size()) + " bytes ('" + printable(name, 40) +
                         "'), expected a name of at most " + std::to_string(kMaxNameBytes));
    }
    const nlohmann::json& facts = c.get("facts");
    const std::string sha = c.str("sha256");
    f.cluster = collectives::cluster_from_json(facts, origin, "cluster.facts");
    c.done();
    if (name != f.cluster.name) {
      c.fail("name", "'" + printable(name, 80) + "' differs from cluster.facts.name '" +
                         printable(f.cluster.name, 80) + "'");
    }
    if (sha != cluster_sha256(name, facts)) {
      c.fail("sha256", "does not match cluster '" + printable(name, 80) + "' (" +
                           cluster_summary(f.cluster) +
                           "): the cluster was edited after planning, expected the cluster this "
                           "plan was made for (plan again for another cluster)");
    }
  }
  {
    JsonFields s = doc.object("setup");
    f.setup.gpus = s.integer("gpus", 1);
    // Any GPU count the planner plans for: whole nodes, part of one, or the same number on each of
    // several (Note [Even nodes] in collectives/rank_placement.h; export's launch line says which).
    try {
      (void)collectives::place_evenly(f.cluster, f.setup.gpus);
    } catch (const Error& e) {
      s.fail("gpus", e.what());
    }
    f.setup.seq = s.integer("seq", 1);
    f.setup.global_batch = s.integer("global_batch", 1);
    // Plans written before stacks existed were made for Megatron-Core's.
    if (s.has("stack")) {
      f.stack = s.line("stack");
      if (f.stack.empty()) s.fail("stack", "expected the name of the stack planned for");
    }
    s.done();
  }
  f.order = doc.parsed("dim_order", parse_dim_order);
  {
    JsonFields c = doc.object("config");
    ParallelConfig& p = f.config;
    for (const ParallelDim& d : parallel_dims()) p.*d.degree = c.integer(std::string(d.name), 1);
    if (c.has("etp")) {
      p.etp = c.integer("etp", 1);
      if (p.etp == p.tp) p.etp = 0;  // written only where it differs from tp
    }
    p.zero = static_cast<int>(c.integer("zero", 0, 3));
    p.micro_batch = c.integer("micro_batch", 1);
    p.recompute = c.parsed("recompute", tensor::parse_recompute_policy);
    p.recompute_layers = c.integer("recompute_layers", 0);
    p.virtual_stages = c.integer("virtual_stages", 1);
    p.sequence_parallel = c.boolean("sequence_parallel");
    p.precision = c.parsed("precision", parse_precision);
    c.done();
    try {
      check_parallel_config(f.model, f.setup, p);
    } catch (const Error& e) {
      c.fail_object(e.what());
    }
  }
  {
    JsonFields m = doc.object("mesh");
    const std::vector<int64_t> shape = m.integers("shape", 1);
    if (shape != f.mesh_shape()) {
      m.fail("shape",
             "expected [pp, dp / e, e, cp, tp] of the config (e the ranks ep takes "
             "from dp), " +
                 nlohmann::json(f.mesh_shape()).dump());
    }
    if (m.strings("names") != mesh_names()) {
      std::string names;
      for (const std::string& n : mesh_names()) names += (names.empty() ? "\"" : ", \"") + n + "\"";
      m.fail("names", "expected [" + names + "]");
    }
    m.done();
  }
  f.stage_layers = doc.integers("stage_layers", 1);
  {
    // from_counts refuses a count below the model chunks (or an overflowing sum) in one line.
    StagePartition split;
    try {
      split = StagePartition::from_counts(f.stage_layers, f.config.virtual_stages);
    } catch (const Error& e) {
      doc.fail("stage_layers", e.what());
    }
    if (split.stages() != f.config.pp || split.layers() != f.model.num_hidden_layers) {
      doc.fail("stage_layers",
               "expected " + std::to_string(f.config.pp) +
                   " layer counts (one per pipeline stage) summing to the model's " +
                   std::to_string(f.model.num_hidden_layers) + " layers");
    }
  }
  f.seed = doc.integer("seed", 0);
  {
    const nlohmann::json& params = doc.array("parameters");
    const std::vector<PlanParameter> expected =
        placed_parameters(f.model, f.config, f.stage_layers);
    if (params.size() != expected.size()) {
      doc.fail("parameters", "has " + std::to_string(params.size()) +
                                 " entries, but the model has " + std::to_string(expected.size()) +
                                 " parameters");
    }
    for (size_t i = 0; i < params.size(); ++i) {
      JsonFields e(params[i], origin, "parameters[" + std::to_string(i) + "]");
      PlanParameter p;
      p.name = e.str("name");
      p.shape = e.integers("shape", 0);
      p.dtype = e.parsed("dtype", tensor::parse_dtype);
      const std::vector<std::string> pl = e.strings("placements");
      for (const std::string& s : pl) {
        try {
          p.placements.push_back(mesh::parse_placement(s));
        } catch (const Error& err) {
          e.fail("placements", err.what());
        }
      }
      p.style = e.str("style");
      p.stage = e.integer("stage", 0, f.config.pp - 1);
      e.done();
      const PlanParameter& want = expected[i];
      if (p.name != want.name) e.fail("name", "expected the model's '" + want.name + "'");
      if (p.shape != want.shape) e.fail("shape", "expected " + nlohmann::json(want.shape).dump());
      if (p.dtype != want.dtype) {
        e.fail("dtype", "expected " + std::string(tensor::dtype_name(want.dtype)));
      }
      if (p.placements != want.placements || p.style != want.style || p.stage != want.stage) {
        const auto text = [](const PlanParameter& x) {
          std::string t;
          for (const mesh::Placement& pl : x.placements)
            t += (t.empty() ? "" : ",") + mesh::to_string(pl);
          return "placements " + (t.empty() ? std::string("[]") : t) + ", style '" +
                 printable(x.style, 40) + "', stage " + std::to_string(x.stage);
        };
        e.fail_object(text(p) + " differ from what the config gives: expected " + text(want));
      }
      f.parameters.push_back(std::move(p));
    }
  }
  {
    JsonFields pr = doc.object("prediction");
    f.step_time_s = pr.number("step_time_s");
    f.mfu = pr.number("mfu");
    f.tokens_per_s = pr.number("tokens_per_s");
    // A plan only holds what fits its own cluster's device (the search keeps nothing larger), so
    // the prediction and every collective's buffer are at most the device's memory: anything
    // larger is an edited plan that materialize --state peak or rehearse would try to allocate.
    const auto device_bytes =
        static_cast<int64_t>(std::min(f.cluster.accelerator.memory_gb.value * 1e9, 9e18));
    const std::string device_note = "expected at most the device memory of the plan's cluster (" +
                                    std::to_string(device_bytes) + " bytes)";
    f.memory_per_gpu_bytes = pr.integer("memory_per_gpu_bytes", 0);
    if (f.memory_per_gpu_bytes > device_bytes) {
      pr.fail("memory_per_gpu_bytes",
              "is " + std::to_string(f.memory_per_gpu_bytes) + ", " + device_note);
    }
    // Optional: plans written before it have none.
    if (pr.has("model_state_per_stage_bytes")) {
      const nlohmann::json& states = pr.array("model_state_per_stage_bytes");
      for (size_t i = 0; i < states.size(); ++i) {
        JsonFields st(states[i], origin,
                      pr.join("model_state_per_stage_bytes") + "[" + std::to_string(i) + "]");
        f.stage_states.push_back(
            {st.integer("parameters", 0), st.integer("gradients", 0), st.integer("optimizer", 0)});
        st.done();
      }
      if (static_cast<int64_t>(f.stage_states.size()) != f.config.pp) {
        pr.fail("model_state_per_stage_bytes",
                "holds " + std::to_string(f.stage_states.size()) + " stages, expected one per " +
                    "pipeline stage (pp " + std::to_string(f.config.pp) + ")");
      }
    }
    // Optional: plans written before it have none.
    if (pr.has("bytes_per_parameter")) {
      JsonFields b = pr.object("bytes_per_parameter");
      constexpr int64_t kMaxBytes = 16;
      MixedPrecision r;
      r.param_bytes = b.integer("weights", 1, kMaxBytes);
      r.grad_bytes = b.integer("gradients", 1, kMaxBytes);
      r.master_bytes = b.integer("master_weights", 0, kMaxBytes);
      r.optimizer_state_bytes = b.integer("optimizer_states", 0, kMaxBytes);
      b.done();
      f.recipe = r;
    }
    // Optional: plans written before rehearse have none.
    if (pr.has("collectives")) {
      const nlohmann::json& cs = pr.array("collectives");
      for (size_t i = 0; i < cs.size(); ++i) {
        JsonFields e(cs[i], origin, pr.join("collectives") + "[" + std::to_string(i) + "]");
        BillCollective c;
        c.what = e.str("what");
        c.kind = e.parsed("kind", collectives::parse_collective_kind);
        c.mesh_dim = e.str("mesh_dim");
        const std::vector<std::string> names = mesh_names();
        if (std::find(names.begin(), names.end(), c.mesh_dim) == names.end()) {
          e.fail("mesh_dim", "'" + printable(c.mesh_dim, 20) + "' is not a dim of the plan's mesh");
        }
        c.group_size = e.integer("group_size", 1, f.setup.gpus);
        c.bytes = e.integer("bytes", 0);
        if (c.bytes > device_bytes) {
          e.fail("bytes", "is " + std::to_string(c.bytes) + ", " + device_note);
        }
        c.calls = e.integer("calls_per_step", 0);
        c.seconds = e.number("time_s");
        c.exposed_s = e.number("exposed_s");
        if (!(c.seconds >= 0)) e.fail("time_s", "expected a number >= 0");
        if (!(c.exposed_s >= 0 && c.exposed_s <= c.seconds * (1 + 1e-9) + 1e-12)) {
          e.fail("exposed_s", "expected a number from 0 to time_s");
        }
        e.done();
        f.collectives.push_back(std::move(c));
      }
    }
    // Predictions are for people to read: materialize checks what it builds, not them. They
    // must still be numbers a reader can use (finite, not negative).
    if (!(f.step_time_s > 0)) pr.fail("step_time_s", "expected a positive number");
    if (!(f.mfu >= 0)) pr.fail("mfu", "expected a number >= 0");
    if (!(f.tokens_per_s > 0)) pr.fail("tokens_per_s", "expected a positive number");
    pr.done();
  }
  doc.done();
  return f;
}

namespace {
// Compact, keys sorted (nlohmann::json keeps them so); invalid UTF-8 (only a hand-edited document
// has it) hashes as U+FFFD instead of throwing, and is then refused as a mismatch or by the reader.
std::string canonical(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

std::string model_sha256(const std::string& name, const nlohmann::json& config) {
  return sha256_hex(canonical(nlohmann::json{{"name", name}, {"config", config}}));
}

std::string cluster_sha256(const std::string& name, const nlohmann::json& facts) {
  return sha256_hex(canonical(nlohmann::json{{"name", name}, {"facts", facts}}));
}

void check_same_model(const PlanFile& f, const tensor::ModelConfig& given, std::string_view label) {
  const nlohmann::json a = tensor::to_hf_json(given), b = tensor::to_hf_json(f.model);
  SP_CHECK(a == b, label, " (", model_summary(given), ") is not the plan's model '",
           printable(f.model_name, 80), "' (", model_summary(f.model), ")", difference_text(a, b),
           "; expected the model the plan was made for");
}

void check_same_cluster(const PlanFile& f, const collectives::Cluster& given,
                        std::string_view label) {
  const nlohmann::json a = plain(collectives::cluster_to_json(given));
  const nlohmann::json b = plain(collectives::cluster_to_json(f.cluster));
  SP_CHECK(a == b, label, " (", cluster_summary(given), ") is not the plan's cluster '",
           printable(f.cluster.name, 80), "' (", cluster_summary(f.cluster), ")",
           difference_text(a, b), "; expected the cluster the plan was made for");
}

PlanFile read_plan_file(const std::filesystem::path& path) {
  // plan.json nests at most 5 deep (parameters[i].placements[k]; the model config's rope_scaling).
  constexpr int kMaxDepth = 16;
  const nlohmann::json j = parse_strict_json(read_text_file(path, "plan file"), path.string(),
                                             kMaxDepth, "a shardplan plan file");
  return plan_from_json(j, path.string());
}

}  // namespace shardplan::planner
