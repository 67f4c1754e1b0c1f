#include "planner/search/strategies.h"

#include <algorithm>

#include "base/checked.h"
#include "base/error.h"
#include "base/nearest_name.h"

namespace shardplan::planner {
namespace {

bool plain(const ParallelConfig& c) { return c.cp == 1 && c.ep == 1; }

std::vector<Strategy> all_strategies() {
  return {
      {"ddp",
       [](const ParallelConfig& c) { return plain(c) && c.tp == 1 && c.pp == 1 && c.zero == 0; },
       "tp = pp = 1, ZeRO 0"},
      {"zero1",
       [](const ParallelConfig& c) { return plain(c) && c.tp == 1 && c.pp == 1 && c.zero == 1; },
       "dp > 1 with tp = pp = 1"},
      {"zero2",
       [](const ParallelConfig& c) { return plain(c) && c.tp == 1 && c.pp == 1 && c.zero == 2; },
       "dp > 1 with tp = pp = 1"},
      {"fsdp",
       [](const ParallelConfig& c) { return plain(c) && c.tp == 1 && c.pp == 1 && c.zero == 3; },
       "dp > 1 with tp = pp = 1"},
      {"tp",
       [](const ParallelConfig& c) { return plain(c) && c.tp > 1 && c.pp == 1 && c.zero == 0; },
       "a tensor-parallel plan for the model and heads divisible by tp > 1"},
      {"fsdp+tp",
       [](const ParallelConfig& c) { return plain(c) && c.tp > 1 && c.pp == 1 && c.zero == 3; },
       "tp > 1 and dp > 1"},
      {"3d",
       [](const ParallelConfig& c) { return plain(c) && c.tp > 1 && c.pp > 1 && c.zero <= 1; },
       "tp > 1 and pp > 1"},
      {"ep", [](const ParallelConfig& c) { return c.cp == 1 && c.ep > 1; },
       "an MoE model, and dp ranks to spread its experts over (ep > 1)"},
      {"auto", [](const ParallelConfig&) { return true; }, ""},
  };
}

}  // namespace

std::string default_strategies(const tensor::ModelConfig& model) {
  // The expert-parallel row only where there are experts to spread.
  return model.num_local_experts > 0 ? "ddp,zero1,zero2,fsdp,tp,fsdp+tp,3d,ep,auto"
                                     : "ddp,zero1,zero2,fsdp,tp,fsdp+tp,3d,auto";
}

std::vector<Strategy> parse_strategies(std::string_view list) {
  const std::vector<Strategy> known = all_strategies();
  std::vector<std::string> names;
  for (const Strategy& s : known) names.push_back(s.name);
  std::vector<Strategy> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view name = list.substr(start, comma - start);
    bool found = false;
    for (const Strategy& s : known) {
      if (s.name == name) {
        SP_CHECK(
            std::none_of(out.begin(), out.end(), [&](const Strategy& o) { return o.name == name; }),
            "--strategies: '", name, "' is listed twice, expected each strategy once");
        out.push_back(s);
        found = true;
      }
    }
    if (!found) {
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      throw Error("--strategies: unknown strategy '" + std::string(name) + "'" +
                  did_you_mean(name, names) + ", expected a comma-separated list of: " + all);
    }
    start = comma + 1;
  }
  return out;
}

ParallelConfig default_config(const TrainingSetup& setup, const Pins& pins, Precision precision) {
  ParallelConfig c;
  c.tp = pins.tp.value_or(1);
  c.pp = pins.pp.value_or(1);
  c.cp = pins.cp.value_or(1);
  c.ep = pins.ep.value_or(1);
  // etp only where it differs from tp (Note [Expert fold]).
  c.etp = pins.etp && *pins.etp != c.tp ? *pins.etp : 0;
  // Pins are user input: their product is checked, not wrapped (a fuzzed --tp x --cp overflowed).
  int64_t tp_pp = 0, others = 0;
  SP_CHECK(mul_into(c.tp, c.pp, tp_pp) && mul_into(tp_pp, c.cp, others), "--tp ", c.tp, " x --pp ",
           c.pp, " x --cp ", c.cp,
           " overflows int64; expected a product that "
           "divides --gpus ",
           setup.gpus);
  SP_CHECK(others >= 1 && setup.gpus % others == 0, "--tp ", c.tp, " x --pp ", c.pp, " x --cp ",
           c.cp, " = ", others, " does not divide --gpus ", setup.gpus,
           ", expected a product that divides the GPUs");
  c.dp = pins.dp.value_or(setup.gpus / others);
  c.zero = pins.zero.value_or(0);
  c.micro_batch = pins.micro_batch.value_or(1);
  c.recompute = pins.recompute.value_or(pins.recompute_layers ? tensor::RecomputePolicy::kFull
                                                              : tensor::RecomputePolicy::kNone);
  c.recompute_layers = pins.recompute_layers.value_or(0);
  c.virtual_stages = pins.virtual_stages.value_or(1);
  // Sequence parallelism comes with tensor parallelism unless pinned off: Megatron-Bridge's
  // recipes and torchtitan's TP plan both shard the norms' sequence over the tp ranks.
  c.sequence_parallel = pins.sequence_parallel.value_or(c.tp > 1);
  c.precision = precision;
  return c;
}

}  // namespace shardplan::planner
