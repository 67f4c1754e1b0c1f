// Which layers each pipeline stage runs (docs/cost-model.md §8.3 "Stage partition").
//   StagePartition even = StagePartition::even(126, 16);          // 7, 8 x 14, 8 ... floor split
//   StagePartition p = balance_stages(126, 16, layer_s, embed_s, head_s);  // 7 + 8 x 14 + 7
//   p.begin(1); p.count(0); p.counts();
//
// Note [Stage partition]
// The first stage also runs the embedding and the last the final norm, output layer and loss, so
// equal layer counts leave the ends slower than the middle and the slowest stage sets the pace.
// balance_stages finds the smallest stage time T for which the stages can hold every layer: with a
// layer taking a, the first stage fits floor((T - e) / a) layers, a middle one floor(T / a) and the
// last floor((T - h) / a) (e, h: the ends' extra time). The optimum is some stage's time, so T is
// one of n a, n a + e or n a + h. Of the partitions that reach T the last stage takes as many
// layers as it fits and the first as few as the rest allow: under 1F1B the first stage holds the
// activations of p micro-batches and the last of one, so this also keeps the peak memory low.
// Llama 3 405B (126 layers, 16 stages) comes out 7 + 8 x 14 + 7, the split its authors used
// (Llama Team 2024, arXiv 2407.21783 §3.3.2: one layer fewer on the first and the last stage).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace shardplan::planner {

// Stage 0 holds `first` layers, the last stage `last`, the p - 2 middle stages share the rest as
// evenly as they can (the later ones one more). One stage holds every layer.
//
// Note [Interleaved layer order]
// With v model chunks per stage (interleaved 1F1B) a stage's layers are not contiguous: the model
// runs virtual stage j p + s on stage s, chunk j (Megatron-LM's order, Narayanan et al. 2021
// §2.2.2), so stage 0 holds the first chunk, stage 1 the second, ..., and stage 0 again the
// (p + 1)-th. A stage of n layers splits them into v chunks as evenly as it can, the later chunks
// one more. The counts per stage are the same either way; only which layers differ.
class StagePartition {
 public:
  // Stages differing by at most one layer: stage s holds [floor(s L / p), floor((s + 1) L / p)).
  static StagePartition even(int64_t layers, int64_t stages);
  // Any counts, one per stage, each at least `chunks` (the model chunks per stage); throws
  // shardplan::Error naming the bad count.
  static StagePartition from_counts(std::span<const int64_t> counts, int64_t chunks = 1);

  int64_t stages() const { return static_cast<int64_t>(begin_.size()) - 1; }
  int64_t layers() const { return begin_.back(); }
  int64_t chunks() const { return chunks_; }
  // Prefix sums of the counts: the first layer of `stage` when there is one chunk per stage.
  int64_t begin(int64_t stage) const { return begin_[static_cast<size_t>(stage)]; }
  int64_t count(int64_t stage) const { return begin(stage + 1) - begin(stage); }
  int64_t max_count() const;
  std::vector<int64_t> counts() const;
  // The stage holding layer `layer` (0 <= layer < layers()), in Note [Interleaved layer order].
  int64_t stage_of_layer(int64_t layer) const;
  bool operator==(const StagePartition&) const = default;

 private:
  std::vector<int64_t> begin_ = {0, 1};  // stages + 1 boundaries
  int64_t chunks_ = 1;
  std::vector<int32_t> interleaved_;  // layer -> stage when chunks_ > 1
};

// The first and last stages' layer counts of Note [Stage partition], without building the
// boundaries (the search asks for every candidate). `layers` >= `stages` >= 1; every stage gets
// at least `min_layers` (the interleaved schedule's v chunks need a layer each), at most layers /
// stages; a non-positive `layer_s` gives the even split's ends.
struct StageEnds {
  int64_t first = 1;
  int64_t last = 1;
  int64_t middle_max = 0;  // the most layers of a middle stage (0 with fewer than 3 stages)
};
StageEnds balance_stage_ends(int64_t layers, int64_t stages, double layer_s, double first_extra_s,
                             double last_extra_s, int64_t min_layers = 1);
StagePartition partition_from_ends(int64_t layers, int64_t stages, const StageEnds& ends);
// The first layer of stage `stage` (0..stages) of partition_from_ends(layers, stages, ends),
// without building it.
int64_t stage_begin(int64_t layers, int64_t stages, const StageEnds& ends, int64_t stage);
// The first middle stage holding `ends.middle_max` layers (0 with fewer than 3 stages): of the
// middle stages it holds the most layers and, being earliest, the most micro-batches in flight.
int64_t widest_middle_stage(int64_t layers, int64_t stages, const StageEnds& ends);

// Note [Stage partition] for layers of unequal times (Note [Stack of layer kinds] in
// step_model.h): `layer_prefix_s` holds the running sum of the layers' times (layers + 1 entries,
// from 0). The first and last stages' counts are searched within kStackEndsReach layers of the
// uniform split taken with the average layer, the middle stages sharing the rest evenly (the later
// ones one more); of equally slow partitions the last stage takes the most layers and the first
// the fewest, as for a uniform model.
inline constexpr int64_t kStackEndsReach = 4;
StageEnds balance_stack_ends(std::span<const double> layer_prefix_s, int64_t stages,
                             double first_extra_s, double last_extra_s, int64_t min_layers = 1);

inline StagePartition balance_stages(int64_t layers, int64_t stages, double layer_s,
                                     double first_extra_s, double last_extra_s,
                                     int64_t min_layers = 1) {
  return partition_from_ends(
      layers, stages,
      balance_stage_ends(layers, stages, layer_s, first_extra_s, last_extra_s, min_layers));
}

}  // namespace shardplan::planner
