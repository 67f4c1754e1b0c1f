// Manifold-constrained hyper-connections (Xie et al. 2025, "mHC: Manifold-Constrained
// Hyper-Connections", arXiv:2512.24880; DeepSeek-V4's residual stream, transformers'
// DeepseekV4HyperConnection and DeepseekV4HyperHead): n parallel copies of the hidden state,
// [B, S, n, h], take the place of the residual stream. Around each half of a layer, one
// connection collapses the n streams into the half's input and writes the half's output back
// into all n, mixed by an n x n matrix made doubly stochastic (Sinkhorn-Knopp). At the end a head
// collapses the streams once more before the final norm. Internal to tensor/models/.
//   HyperConnection (n streams, h hidden, m = (2 + n) n):  fn [m, n h], base [m], scale [3]
//   HyperHead:                                             hc_fn [n, n h], hc_base [n], hc_scale
//   [1]
//
// Note [Hyper-connection trace]
// Per site: the streams flattened to [B, S, n h], RMS-normalized without a weight in float32, and
// projected (float32) to the m mixing logits; n pre weights (sigmoid), n post weights (2 x
// sigmoid) and the n x n combination (a softmax, then Sinkhorn's alternate row and column
// normalizations: hc_sinkhorn_iters passes on [B, S, n, n], traced as one normalization, as a
// trainer's fused kernel runs them). The half's input is the pre-weighted sum of the streams; its
// output y becomes post_i y + sum_j comb_ji X_j for each stream i (a batched [n, n] x [n, h]
// product per token). The pipeline sends the n streams between stages: n times a plain
// residual's bytes (planner/search/planner.cpp).
#pragma once

#include <string>

#include "tensor/module.h"

namespace shardplan::tensor::models {

class HyperConnection : public Module {
 public:
  HyperConnection(std::string type_name, int64_t streams, int64_t hidden, double eps,
                  const TensorOptions& o);
  // What collapse hands the half, and what expand needs to write its output back.
  struct Mix {
    Tensor input;  // [B, S, h]
    Tensor post;   // [B, S, n], float32
    Tensor comb;   // [B, S, n, n], float32
  };
  // streams [B, S, n, h] (run inside the layer's call).
  Mix collapse(const Tensor& streams);
  // The half's output y [B, S, h] written back: [B, S, n, h].
  Tensor expand(const Tensor& y, const Tensor& streams, const Mix& mix);

 private:
  int64_t n_;
  double eps_;
};

class HyperHead : public Module {
 public:
  HyperHead(std::string type_name, int64_t streams, int64_t hidden, double eps,
            const TensorOptions& o);
  // streams [B, S, n, h] -> [B, S, h].
  Tensor forward(const Tensor& streams) override;

 private:
  int64_t n_;
  double eps_;
};

}  // namespace shardplan::tensor::models
