#include "planner/cost/stage_partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace shardplan::planner {
namespace {

void check_shape(int64_t layers, int64_t stages) {
  SP_CHECK(stages >= 1 && layers >= stages, stages, " pipeline stages for ", layers,
           " layers, expected between 1 and the number of layers");
}

}  // namespace

StagePartition StagePartition::even(int64_t layers, int64_t stages) {
  check_shape(layers, stages);
  StagePartition p;
  p.begin_.resize(static_cast<size_t>(stages) + 1);
  for (int64_t s = 0; s <= stages; ++s) p.begin_[static_cast<size_t>(s)] = s * layers / stages;
  return p;
}

StagePartition StagePartition::from_counts(std::span<const int64_t> counts, int64_t chunks) {
  SP_CHECK(!counts.empty(), "no pipeline stages, expected one layer count per stage");
  SP_CHECK(chunks >= 1, chunks, " model chunks per stage, expected at least 1");
  constexpr int64_t kMaxLayers = std::numeric_limits<int32_t>::max();
  StagePartition p;
  p.chunks_ = chunks;
  p.begin_.assign(1, 0);
  for (size_t s = 0; s < counts.size(); ++s) {
    SP_CHECK(counts[s] >= chunks && counts[s] <= kMaxLayers - p.begin_.back(), "stage ", s,
             " with ", counts[s], " layers, expected at least ", chunks,
             chunks > 1 ? " (one per model chunk)" : "", " and at most 2^31 layers in all");
    p.begin_.push_back(p.begin_.back() + counts[s]);
  }
  if (chunks > 1) {
    // Note [Interleaved layer order]: virtual stage j p + s is chunk j of stage s.
    p.interleaved_.reserve(static_cast<size_t>(p.layers()));
    for (int64_t j = 0; j < chunks; ++j) {
      for (size_t s = 0; s < counts.size(); ++s) {
        const int64_t n = counts[s], extra_from = chunks - n % chunks;
        const int64_t size = n / chunks + (j >= extra_from ? 1 : 0);
        p.interleaved_.insert(p.interleaved_.end(), static_cast<size_t>(size),
                              static_cast<int32_t>(s));
      }
    }
  }
  return p;
}

int64_t StagePartition::max_count() const {
  int64_t most = 0;
  for (int64_t s = 0; s < stages(); ++s) most = std::max(most, count(s));
  return most;
}

std::vector<int64_t> StagePartition::counts() const {
  std::vector<int64_t> out;
  for (int64_t s = 0; s < stages(); ++s) out.push_back(count(s));
  return out;
}

int64_t StagePartition::stage_of_layer(int64_t layer) const {
  SP_CHECK(layer >= 0 && layer < layers(), "layer ", layer, ", expected one of 0..", layers() - 1);
  if (chunks_ > 1) return interleaved_[static_cast<size_t>(layer)];
  const auto it = std::upper_bound(begin_.begin(), begin_.end(), layer);
  return static_cast<int64_t>(it - begin_.begin()) - 1;
}

StageEnds balance_stage_ends(int64_t layers, int64_t stages, double layer_s, double first_extra_s,
                             double last_extra_s, int64_t min_layers) {
  check_shape(layers, stages);
  const int64_t L = layers, p = stages, lo = min_layers;
  SP_CHECK(lo >= 1 && lo <= L / p, "at least ", lo, " layers on each of ", p, " stages of ", L,
           " layers, expected between 1 and ", L / p);
  if (p == 1) return {L, L, 0};
  const double a = layer_s, e = std::max(0.0, first_extra_s), h = std::max(0.0, last_extra_s);
  int64_t first = L / p, last = L - (p - 1) * L / p;  // the even split
  int64_t cm = (L + p - 1) / p;
  if (a > 0 && std::isfinite(a) && std::isfinite(e) && std::isfinite(h)) {
    // In n a + x seconds a stage with `extra` beside its layers fits n + k layers, k = floor((x -
    // extra) / a), clamped to [0, L]: the caps move with n in step, so the smallest n that holds
    // every layer follows from the sum, then from each stage fitting at least `lo` layers.
    const auto Ld = static_cast<double>(L);
    auto k_of = [&](double x, double extra) {
      return static_cast<int64_t>(std::clamp(std::floor((x - extra) / a + 1e-9), -2 * Ld, 2 * Ld));
    };
    auto cap = [&](int64_t n, int64_t k) { return std::clamp<int64_t>(n + k, 0, L); };
    double best = std::numeric_limits<double>::infinity();
    int64_t best_n = 0, best_km = 0, best_kl = 0;
    for (double x : {0.0, e, h}) {
      const int64_t k0 = k_of(x, e), km = k_of(x, 0), kl = k_of(x, h);
      const int64_t short_by = L - k0 - (p - 2) * km - kl;  // p n >= short_by
      int64_t n = std::max<int64_t>(
          {lo, lo - k0, lo - kl, p > 2 ? lo - km : lo, short_by > 0 ? (short_by + p - 1) / p : 0});
      // Clamping a cap at L only happens when that stage alone could hold every layer.
      while (cap(n, k0) + (p - 2) * cap(n, km) + cap(n, kl) < L) ++n;
      const double t = static_cast<double>(n) * a + x;
      if (t < best) {
        best = t;
        best_n = n;
        best_km = km;
        best_kl = kl;
      }
    }
    cm = cap(best_n, best_km);
    last = std::min(cap(best_n, best_kl), L - (p - 1) * lo);
    first = std::max<int64_t>(lo, L - last - (p - 2) * cm);
  }
  const int64_t rest = L - first - last;
  return {first, last, p > 2 ? (rest + p - 3) / (p - 2) : 0};
}

StageEnds balance_stack_ends(std::span<const double> layer_prefix_s, int64_t stages,
                             double first_extra_s, double last_extra_s, int64_t min_layers) {
  const auto layers = static_cast<int64_t>(layer_prefix_s.size()) - 1;
  const int64_t L = layers, p = stages, lo = min_layers;
  const double total = layer_prefix_s.back();
  const StageEnds guess = balance_stage_ends(L, p, L > 0 ? total / static_cast<double>(L) : 0,
                                             first_extra_s, last_extra_s, lo);
  if (p == 1 || !(total > 0) || !std::isfinite(total)) return guess;
  const double e = std::max(0.0, first_extra_s), h = std::max(0.0, last_extra_s);
  // The slowest stage of the partition with these ends, or any value above `bound` as soon as
  // one stage exceeds it (such ends lose to the best so far whatever the other stages hold). The
  // two ends first: they differ between the candidates, the middle stages mostly do not.
  const double* at = layer_prefix_s.data();
  auto slowest = [&](const StageEnds& ends, double bound) {
    double worst = std::max(at[ends.first] + e, at[L] - at[L - ends.last] + h);
    // The middle stages in order, as stage_begin lays them out: rest / m layers each, one more
    // for the last rest % m of them (walked without stage_begin's divisions per stage).
    const int64_t m = p - 2;
    if (m <= 0) return worst;
    const int64_t rest = L - ends.first - ends.last, q = rest / m, extra_from = m - rest % m;
    int64_t b = ends.first;
    for (int64_t i = 0; i < m && worst <= bound; ++i) {
      const int64_t end = b + q + (i >= extra_from ? 1 : 0);
      worst = std::max(worst, at[end] - at[b]);
      b = end;
    }
    return worst;
  };
  StageEnds best = guess;
  double best_t = slowest(guess, std::numeric_limits<double>::infinity());
  const int64_t middle = p - 2;
  for (int64_t first = std::max(lo, guess.first - kStackEndsReach);
       first <= guess.first + kStackEndsReach; ++first) {
    for (int64_t last = std::max(lo, guess.last - kStackEndsReach);
         last <= guess.last + kStackEndsReach; ++last) {
      const int64_t rest = L - first - last;
      if (rest < middle * lo || (middle == 0 && rest != 0)) continue;
      const StageEnds ends{first, last, middle > 0 ? (rest + middle - 1) / middle : 0};
      // The even split of the rest must leave each middle stage `lo` layers.
      if (middle > 0 && rest / middle < lo) continue;
      const double t = slowest(ends, best_t);
      if (t < best_t ||
          (t == best_t && (last > best.last || (last == best.last && first < best.first)))) {
        best = ends;
        best_t = t;
      }
    }
  }
  return best;
}

int64_t stage_begin(int64_t layers, int64_t stages, const StageEnds& ends, int64_t stage) {
  if (stage <= 0) return 0;
  if (stage >= stages) return layers;
  if (stage == stages - 1) return layers - ends.last;
  // Middle stage i = stage - 1 of m: rest / m layers, one more for the last rest % m of them.
  const int64_t m = stages - 2, rest = layers - ends.first - ends.last;
  const int64_t i = stage - 1, extra_from = m - rest % m;
  return ends.first + i * (rest / m) + std::max<int64_t>(0, i - extra_from);
}

int64_t widest_middle_stage(int64_t layers, int64_t stages, const StageEnds& ends) {
  if (stages <= 2) return 0;
  const int64_t m = stages - 2, rest = layers - ends.first - ends.last;
  return rest % m == 0 ? 1 : 1 + m - rest % m;  // stage_begin's extra_from, as a stage
}

StagePartition partition_from_ends(int64_t layers, int64_t stages, const StageEnds& ends) {
  check_shape(layers, stages);
  std::vector<int64_t> counts(static_cast<size_t>(stages), 0);
  if (stages == 1) {
    counts[0] = layers;
  } else {
    counts.front() = ends.first;
    counts.back() = ends.last;
    const int64_t middle = stages - 2, rest = layers - ends.first - ends.last;
    SP_CHECK(rest >= middle && ends.first >= 1 && ends.last >= 1, "stage ends of ", ends.first,
             " and ", ends.last, " layers leave ", rest, " for ", middle,
             " middle stages, expected at least one layer per stage");
    // The later middle stages take one more: the earlier ones hold more micro-batches.
    for (int64_t s = 1; s <= middle; ++s) {
      counts[static_cast<size_t>(s)] =
          stage_begin(layers, stages, ends, s + 1) - stage_begin(layers, stages, ends, s);
    }
  }
  return StagePartition::from_counts(counts);
}

}  // namespace shardplan::planner
