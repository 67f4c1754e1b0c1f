// Note [Export is exact or refused] (planner/plan/plan_export.h): the virtual-stage split and the
// Megatron layout worked out by hand, the degrees in each format, and the refusals. The exported
// files against the frameworks' pinned option lists: tests/cli/export_schema_check.py.
#include "planner/plan/plan_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "collectives/cluster.h"
#include "planner/plan/plan_file.h"
#include "planner/search/planner.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

PlanFile plan_of(const char* model, int64_t gpus, const Pins& pins, const char* stack = "",
                 const char* cluster = "dgx-h100") {
  PlannerOptions o;
  if (*stack != '\0') o.stack = load_stack(resolve_stack(stack));
  Planner p(tensor::find_model_config(model),
            collectives::load_cluster(collectives::resolve_cluster(cluster)),
            {.gpus = gpus, .seq = 4096, .global_batch = 64}, o);
  const SearchResult r = p.search(pins, 1);
  EXPECT_FALSE(r.top.empty());
  return plan_file(p, r.top.at(0), model);
}

// Stages of 7, 9, 9 and 7 layers with 2 chunks each: chunk 0 of stage s holds floor(n / 2), chunk
// 1 the rest, and virtual stage j * 4 + s is chunk j of stage s.
TEST(PlanExport, VirtualStagesInMegatronOrder) {
  PlanFile f;
  f.config.pp = 4;
  f.config.virtual_stages = 2;
  f.stage_layers = {7, 9, 9, 7};
  EXPECT_EQ(virtual_stage_layers(f), (std::vector<int64_t>{3, 4, 4, 3, 4, 5, 5, 4}));
  f.config.virtual_stages = 1;
  EXPECT_EQ(virtual_stage_layers(f), (std::vector<int64_t>{7, 9, 9, 7}));
}

TEST(PlanExport, MegatronStatesTheDegreesAndTheLayout) {
  Pins pins;
  pins.tp = 4;
  pins.pp = 4;
  pins.dp = 1;
  pins.virtual_stages = 2;
  const PlanFile f = plan_of("llama3-8b", 16, pins);
  const std::string args = export_megatron(f, {}).config;
  EXPECT_THAT(args, HasSubstr("\n--tensor-model-parallel-size 4\n"));
  EXPECT_THAT(args, HasSubstr("\n--pipeline-model-parallel-size 4\n"));
  EXPECT_THAT(args, HasSubstr("\n--num-layers 32\n"));
  std::string layout = "E";
  const std::vector<int64_t> chunks = virtual_stage_layers(f);
  for (size_t k = 0; k < chunks.size(); ++k) {
    layout += (k ? "|" : "") + std::string(static_cast<size_t>(chunks[k]), 't');
  }
  layout += "L";
  const bool uniform = f.stage_layers == std::vector<int64_t>{8, 8, 8, 8};
  EXPECT_THAT(args, HasSubstr(uniform ? "--num-virtual-stages-per-pipeline-rank 2"
                                      : "--pipeline-model-parallel-layout " + layout + "\n"));
}

TEST(PlanExport, TorchtitanDegreesMultiplyToTheWorld) {
  Pins pins;
  pins.tp = 2;
  pins.dp = 4;
  pins.zero = 3;
  const PlanFile f = plan_of("llama3-8b", 8, pins, "torchtitan");
  const std::string toml = export_torchtitan(f, {}).config;
  EXPECT_THAT(toml, HasSubstr("data_parallel_shard_degree = 4\n"));
  EXPECT_THAT(toml, HasSubstr("fsdp_reshard_after_forward = \"always\"\n"));
  EXPECT_THAT(toml, HasSubstr("tensor_parallel_degree = 2\n"));
  EXPECT_THAT(toml, HasSubstr("name = \"llama3\"\nflavor = \"8B\"\n"));
}

TEST(PlanExport, RefusesWhatAFrameworkCannotExpress) {
  Pins zero1;
  zero1.tp = 1;
  zero1.pp = 1;
  zero1.zero = 1;
  const PlanFile a = plan_of("llama3-8b", 8, zero1);
  EXPECT_THAT([&] { (void)export_torchtitan(a, {}); },
              ThrowsMessage<Error>(HasSubstr("torchtitan has no ZeRO-1")));
  Pins tp2;
  tp2.tp = 2;
  const PlanFile b = plan_of("llama3-8b", 8, tp2);
  EXPECT_THAT([&] { (void)export_deepspeed(b, {}); },
              ThrowsMessage<Error>(HasSubstr("the plan has tp 2")));
  EXPECT_THAT([] { (void)parse_framework("jax"); },
              ThrowsMessage<Error>(HasSubstr("expected megatron, torchtitan or deepspeed")));
}

// The launch line of `gpus` GPUs planned with tp `tp`: `nodes` nodes of `per_node` processes.
void expect_launch(int64_t gpus, int64_t tp, int nodes, int per_node,
                   const char* cluster = "dgx-h100") {
  Pins pins;
  pins.tp = tp;
  const PlanFile f = plan_of("llama3-8b", gpus, pins, "", cluster);
  const std::string n = std::to_string(nodes), k = std::to_string(per_node);
  EXPECT_THAT(launch_line(f, Launcher::kTorchrun, "x.py"),
              HasSubstr("torchrun --nnodes " + n + " --nproc-per-node " + k + " "));
  EXPECT_THAT(
      launch_line(f, Launcher::kSrun, "x.py"),
      HasSubstr("srun --nodes " + n + " --ntasks-per-node 1 --gpus-per-node " + k + " torchrun"));
  // The plan file reads back (one of 12 GPUs was refused before Note [Even nodes]).
  EXPECT_EQ(plan_from_json(nlohmann::json::parse(plan_to_json(f).dump()), "plan"), f);
}

// 16 GPUs of 8-GPU nodes: two nodes, eight processes each. 12 fill no whole node: the planner
// spreads them as 2 nodes x 6 (Note [Even nodes] in collectives/rank_placement.h), and the launch
// line asks for those nodes.
TEST(PlanExport, LaunchLineForThePlansNodes) {
  expect_launch(16, 8, 2, 8);
  expect_launch(12, 2, 2, 6);
  // A GB200 NVL72 rack is one node of 18 hosts (4-GPU trays): 128 GPUs are 2 racks x 64, started
  // as 32 hosts x 4 (collectives::launch_hosts).
  expect_launch(128, 4, 32, 4, "gb200-nvl72");
}

}  // namespace
}  // namespace shardplan::planner
