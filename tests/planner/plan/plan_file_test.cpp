// plan.json (planner/plan/plan_file.h): a plan written and read back is the same plan, byte for
// byte through JSON; hostile and inconsistent documents are refused with one line naming the field.
#include "planner/plan/plan_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "collectives/cluster.h"
#include "planner/cost/stage_partition.h"
#include "planner/search/strategies.h"
#include "tests/tensor/json_hostile_support.h"

namespace shardplan::planner {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Llama-3-8B on 64 H100s, tp 8 x pp 2 x dp 4 with ZeRO-3 over dp: every kind of placement;
// `chunks` model chunks per stage.
PlanFile llama_plan(int64_t chunks = 1) {
  Planner p(tensor::find_model_config("llama3-8b"),
            collectives::load_cluster(collectives::resolve_cluster("dgx-h100")),
            {.gpus = 64, .seq = 4096, .global_batch = 256}, {});
  Pins pins;
  pins.tp = 8;
  pins.pp = 2;
  pins.dp = 4;
  pins.zero = 3;
  pins.virtual_stages = chunks;
  const SearchResult r = p.search(pins, 1);
  EXPECT_FALSE(r.top.empty());
  return plan_file(p, r.top.at(0), "llama3-8b", 1234);
}

TEST(PlanFile, RoundTripsExactly) {
  const PlanFile f = llama_plan();
  const nlohmann::ordered_json j = plan_to_json(f);
  const PlanFile back = plan_from_json(nlohmann::json::parse(j.dump()), "plan.json");
  EXPECT_EQ(back, f);
  EXPECT_EQ(plan_to_json(back).dump(), j.dump());
  EXPECT_EQ(j["mesh"]["shape"], nlohmann::ordered_json({2, 4, 1, 1, 8}));
  // q_proj: column-parallel on tp (Shard(0)), FSDP's dim-0 split on dp after it (StridedShard).
  const PlanParameter& q = back.parameters.at(1);
  EXPECT_EQ(q.name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.style, "colwise");
  EXPECT_EQ(mesh::to_string(q.placements), "R,SS0:8,R,R,S0");
  EXPECT_EQ(back.parameters.back().stage, 1);  // lm_head on the last stage
  // The output layer (128,256 x 4,096) does about twice a layer's GEMM work (4 h^2 + 3 h 14336
  // per token): the last stage takes fewer of the 32 layers.
  EXPECT_EQ(j["stage_layers"], nlohmann::ordered_json({17, 15}));
}

TEST(PlanFile, InterleavedPlansPlaceLayersInChunkOrder) {
  // Two model chunks per stage: each stage's layers come in two runs (Note [Interleaved layer
  // order]), and the plan places every layer's parameters there.
  const PlanFile f = llama_plan(2);
  ASSERT_EQ(f.config.virtual_stages, 2);
  const StagePartition split = StagePartition::from_counts(f.stage_layers, 2);
  const std::string prefix = "model.layers.";
  std::vector<int64_t> stage_of_layer(32, -1);
  for (const PlanParameter& x : f.parameters) {
    if (x.name.rfind(prefix, 0) != 0) continue;
    const int64_t layer = std::stoll(x.name.substr(prefix.size()));
    EXPECT_EQ(x.stage, split.stage_of_layer(layer)) << x.name;
    stage_of_layer[static_cast<size_t>(layer)] = x.stage;
  }
  // Stage 0 runs the first chunk, then stage 1, then stage 0 again: not one contiguous run.
  EXPECT_EQ(stage_of_layer.front(), 0);
  EXPECT_EQ(stage_of_layer.back(), 1);
  const int64_t first_chunk = f.stage_layers[0] / 2;
  EXPECT_EQ(stage_of_layer[static_cast<size_t>(first_chunk)], 1);
  EXPECT_EQ(stage_of_layer[static_cast<size_t>(first_chunk + f.stage_layers[1] / 2 + 1)], 0);
  const nlohmann::ordered_json j = plan_to_json(f);
  EXPECT_EQ(plan_from_json(nlohmann::json::parse(j.dump()), "plan.json"), f);
}

TEST(PlanFile, InconsistentPlansAreRefused) {
  const nlohmann::json valid = nlohmann::json::parse(plan_to_json(llama_plan()).dump());
  auto refused = [&](const char* pointer, const nlohmann::json& v, const char* what) {
    nlohmann::json j = valid;
    j[nlohmann::json::json_pointer(pointer)] = v;
    EXPECT_THAT([&] { (void)plan_from_json(j, "plan.json"); },
                ThrowsMessage<Error>(HasSubstr(what)))
        << pointer;
  };
  refused("/config/tp", 4, "= 32, expected --gpus 64");  // 4 x 2 x 4 != 64
  refused("/mesh/shape/0", 4, "field 'mesh.shape'");
  refused("/setup/gpus", 128, "");
  refused("/parameters/1/placements/4", "R", "field 'parameters[1]'");
  refused("/parameters/0/name", "wte", "expected the model's 'model.embed_tokens.weight'");
  refused("/model/config/num_attention_heads", 30, "field 'model.config'");
  refused("/format", "shardplan.cluster", "field 'format'");
  // Llama-3-8B's 32 layers on 2 stages: the counts must cover them, one per stage...
  refused("/config/recompute_layers", 4, "expected --recompute full");
  refused("/stage_layers/0", 20, "field 'stage_layers'");
  refused("/stage_layers", nlohmann::json::array({32}), "field 'stage_layers'");
  // ...and the parameters must sit on the stages the counts give (layer 15 moves to stage 1).
  refused("/stage_layers", nlohmann::json::array({15, 17}),
          "stage 0 differ from what the config gives: expected");
  nlohmann::json short_list = valid;
  short_list["parameters"].erase(short_list["parameters"].size() - 1);
  EXPECT_THAT([&] { (void)plan_from_json(short_list, "plan.json"); },
              ThrowsMessage<Error>(HasSubstr("parameters")));
}

TEST(PlanFile, HostileDocumentsNameTheField) {
  // A small plan (GPT-2 on 4 CPU ranks) keeps the sweep fast.
  Planner p(tensor::find_model_config("gpt2"),
            collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = 4, .seq = 128, .global_batch = 8}, {});
  const PlanResult r =
      p.estimate(default_config(p.setup(), {}, Precision::kBf16), DimOrder::kTpInner, nullptr);
  nlohmann::json valid = nlohmann::json::parse(plan_to_json(plan_file(p, r, "gpt2")).dump());
  // The model config and the parameter list have their own checks (above, and parse_model_config's
  // tests); the sweep covers the rest.
  // The cluster's peaks are keyed by dtype (data, not field names).
  test::Reader reader{
      "plan",
      [](const nlohmann::json& j) { (void)plan_from_json(j, "plan.json"); },
      valid,
      /*free_keys=*/
      {"cluster.facts.accelerator.dense_tflops", "cluster.facts.accelerator.matmul_efficiency"},
      /*any_value=*/{"model.config", "parameters"}};
  test::sweep_fields(reader);
}

// A small plan (GPT-2 on 4 CPU ranks) as the JSON of a plan file.
nlohmann::json gpt2_plan_json() {
  Planner p(tensor::find_model_config("gpt2"),
            collectives::load_cluster(collectives::resolve_cluster("cpu-local")),
            {.gpus = 4, .seq = 128, .global_batch = 8}, {});
  const PlanResult r =
      p.estimate(default_config(p.setup(), {}, Precision::kBf16), DimOrder::kTpInner, nullptr);
  return nlohmann::json::parse(plan_to_json(plan_file(p, r, "gpt2")).dump());
}

std::string refusal(const nlohmann::json& j) {
  try {
    (void)plan_from_json(j, "plan.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "<accepted>";
}

// The predicted model state per stage: one entry per pipeline stage (GPT-2 on 4 CPU ranks has
// one stage); plans written before it existed load with none.
TEST(PlanFile, ModelStatePerStageIsOptionalButWhole) {
  nlohmann::json j = gpt2_plan_json();
  const nlohmann::json& states = j["prediction"]["model_state_per_stage_bytes"];
  ASSERT_EQ(states.size(), 1U);
  // fp32 on a CPU: gradients as large as the weights, Adam's two moments twice (ZeRO 0).
  EXPECT_EQ(states[0]["gradients"], states[0]["parameters"]);
  EXPECT_EQ(states[0]["optimizer"].get<int64_t>(), 2 * states[0]["parameters"].get<int64_t>());
  nlohmann::json two = j;
  two["prediction"]["model_state_per_stage_bytes"].push_back(states[0]);
  EXPECT_THAT([&] { (void)plan_from_json(two, "plan.json"); },
              ThrowsMessage<Error>(HasSubstr("holds 2 stages, expected one per pipeline stage")));
  j["prediction"].erase("model_state_per_stage_bytes");
  const PlanFile old = plan_from_json(j, "plan.json");
  EXPECT_TRUE(old.stage_states.empty());
  // Such a plan writes back without it, and reads back equal (the fuzzed round trip).
  const nlohmann::json back = nlohmann::json::parse(plan_to_json(old).dump());
  EXPECT_FALSE(back["prediction"].contains("model_state_per_stage_bytes"));
  EXPECT_TRUE(plan_from_json(back, "plan.json") == old);
}

// The bill's collectives (what `rehearse` runs): written with the plan, optional on read, each
// field checked.
TEST(PlanFile, CollectivesAreOptionalAndChecked) {
  nlohmann::json j = gpt2_plan_json();
  const nlohmann::json& cs = j["prediction"]["collectives"];
  ASSERT_FALSE(cs.empty());
  for (const nlohmann::json& c : cs) {
    EXPECT_GT(c["bytes"].get<int64_t>(), 0);
    EXPECT_GT(c["calls_per_step"].get<int64_t>(), 0);
    EXPECT_LE(c["exposed_s"].get<double>(), c["time_s"].get<double>());
  }
  const PlanFile f = plan_from_json(j, "plan.json");
  EXPECT_EQ(f.collectives.size(), cs.size());
  EXPECT_TRUE(plan_from_json(nlohmann::json::parse(plan_to_json(f).dump()), "plan.json") == f);
  nlohmann::json bad = j;
  bad["prediction"]["collectives"][0]["mesh_dim"] = "xp";
  EXPECT_THAT(refusal(bad), HasSubstr("'xp' is not a dim of the plan's mesh"));
  bad = j;
  bad["prediction"]["collectives"][0]["exposed_s"] = 2 * cs[0]["time_s"].get<double>() + 1;
  EXPECT_THAT(refusal(bad), HasSubstr("expected a number from 0 to time_s"));
  bad = j;
  bad["prediction"]["collectives"][0]["kind"] = "gossip";
  EXPECT_THAT(refusal(bad), HasSubstr("collectives[0].kind"));
  bad = j;
  bad["prediction"]["collectives"][0]["group_size"] = 5;
  EXPECT_THAT(refusal(bad), HasSubstr("group_size"));
  j["prediction"].erase("collectives");
  const PlanFile old = plan_from_json(j, "plan.json");
  EXPECT_TRUE(old.collectives.empty());
  EXPECT_FALSE(
      nlohmann::json::parse(plan_to_json(old).dump())["prediction"].contains("collectives"));
}

// The model state's bytes per parameter the prediction priced (what materialize allocates):
// fp32 Adam on a CPU cluster, 4 + 4 + 0 + 8; optional on read, each count checked.
TEST(PlanFile, BytesPerParameterAreThePricedRecipe) {
  nlohmann::json j = gpt2_plan_json();
  const nlohmann::json& b = j["prediction"]["bytes_per_parameter"];
  EXPECT_EQ(b,
            nlohmann::json::parse(
                R"({"weights": 4, "gradients": 4, "master_weights": 0, "optimizer_states": 8})"));
  const PlanFile f = plan_from_json(j, "plan.json");
  ASSERT_TRUE(f.recipe.has_value());
  EXPECT_EQ(*f.recipe, MixedPrecision::adam_fp32());
  nlohmann::json bad = j;
  bad["prediction"]["bytes_per_parameter"]["gradients"] = 0;
  EXPECT_THAT(refusal(bad), HasSubstr("bytes_per_parameter.gradients"));
  bad = j;
  bad["prediction"]["bytes_per_parameter"]["moments"] = 8;
  EXPECT_THAT(refusal(bad), HasSubstr("unknown key"));
  j["prediction"].erase("bytes_per_parameter");
  const PlanFile old = plan_from_json(j, "plan.json");
  EXPECT_FALSE(old.recipe.has_value());
  EXPECT_FALSE(nlohmann::json::parse(plan_to_json(old).dump())["prediction"].contains(
      "bytes_per_parameter"));
}

TEST(PlanFile, IsSelfContainedWithHashesOfModelAndCluster) {
  const nlohmann::json j = gpt2_plan_json();
  EXPECT_EQ(j["cluster"]["name"], "cpu-local");
  EXPECT_EQ(j["cluster"]["facts"]["accelerator"]["memory_gb"]["value"], 12.6);
  EXPECT_EQ(j["mesh"]["names"], nlohmann::json({"pp", "dp", "ep", "cp", "tp"}));
  // The hashes are SHA-256 over {"name", "config" | "facts"} with sorted keys: recomputed here
  // from the document's own values, and 64 hex digits.
  EXPECT_EQ(j["model"]["sha256"], model_sha256("gpt2", j["model"]["config"]));
  EXPECT_EQ(j["cluster"]["sha256"], cluster_sha256("cpu-local", j["cluster"]["facts"]));
  EXPECT_EQ(j["model"]["sha256"].get<std::string>().size(), 64u);
  // Read back, the embedded facts are the cluster the plan was made for.
  const PlanFile f = plan_from_json(j, "plan.json");
  EXPECT_EQ(f.cluster, collectives::load_cluster(collectives::resolve_cluster("cpu-local")));
}

TEST(PlanFile, AModelOrClusterEditedAfterPlanningIsRefusedNamingBoth) {
  const nlohmann::json valid = gpt2_plan_json();
  nlohmann::json j = valid;
  j["model"]["name"] = "llama3-8b";  // a GPT-2 plan relabelled
  EXPECT_THAT(refusal(j),
              AllOf(HasSubstr("field 'model.sha256'"), HasSubstr("model.name 'llama3-8b'"),
                    HasSubstr("(gpt2: 12 layers, hidden 768")));
  j = valid;
  j["model"]["config"]["n_layer"] = 6;
  EXPECT_THAT(refusal(j), HasSubstr("(gpt2: 6 layers"));
  j = valid;
  j["cluster"]["facts"]["accelerator"]["memory_gb"]["value"] = 80;
  EXPECT_THAT(refusal(j), AllOf(HasSubstr("field 'cluster.sha256'"), HasSubstr("'cpu-local'")));
  j = valid;
  j["cluster"]["name"] = "../../../../etc/passwd";  // a name, never a path that is read
  EXPECT_THAT(refusal(j), HasSubstr("field 'cluster.name': '../../../../etc/passwd' differs "
                                    "from cluster.facts.name 'cpu-local'"));
  j = valid;
  j["version"] = 2;
  EXPECT_THAT(refusal(j), HasSubstr("written by an older shardplan"));
}

TEST(PlanFile, PredictionsAreForPeopleAndNotCheckedAgainstTheHardware) {
  // An fp8 plan's MFU is counted against the bf16 peak and may exceed 1 (issue: what MFU means is
  // the software-stack profiles' to define); materialize builds the plan all the same.
  nlohmann::json j = gpt2_plan_json();
  j["prediction"]["mfu"] = 1.17;
  EXPECT_EQ(refusal(j), "<accepted>");
  j["prediction"]["mfu"] = -0.1;
  EXPECT_THAT(refusal(j), HasSubstr("field 'prediction.mfu': expected a number >= 0"));
}

TEST(PlanFile, AModelOrClusterNamedAtMaterializeMustBeThePlans) {
  const PlanFile f = plan_from_json(gpt2_plan_json(), "plan.json");
  EXPECT_NO_THROW(check_same_model(f, tensor::find_model_config("gpt2"), "--model gpt2"));
  EXPECT_THAT(
      [&] { check_same_model(f, tensor::find_model_config("pythia-160m"), "--model pythia-160m"); },
      ThrowsMessage<Error>(AllOf(HasSubstr("--model pythia-160m (gpt_neox: 12 layers"),
                                 HasSubstr("is not the plan's model 'gpt2' (gpt2: 12 layers"))));
  const collectives::Cluster h100 =
      collectives::load_cluster(collectives::resolve_cluster("dgx-h100"));
  EXPECT_THAT([&] { check_same_cluster(f, h100, "--cluster dgx-h100"); },
              ThrowsMessage<Error>(AllOf(HasSubstr("--cluster dgx-h100 (H100 SXM5 80 GB, 8 per "
                                                   "node) is not the plan's cluster 'cpu-local'"),
                                         HasSubstr("there,"), HasSubstr("in the plan"))));
}

}  // namespace
}  // namespace shardplan::planner
