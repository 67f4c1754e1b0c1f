#include "tensor/models/compressed_attention.h"

#include <optional>

#include "tensor/layers.h"
#include "tensor/models/blocks.h"

namespace shardplan::tensor::models {
namespace {

constexpr const char* kPrefix = "DeepseekV4";

ModulePtr rms_norm_of(int64_t dim, double eps, const TensorOptions& o) {
  return std::make_shared<RMSNorm>(DimVector{dim}, eps, true, o);
}

// x [B, H, S, D] rotated on its LAST cos.size(-1) channels (V4 keeps the unrotated channels
// first).
Tensor rotate_trailing(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
  const int64_t d = x.size(-1), rot = cos_t.size(-1);
  if (rot == d) return apply_rotary(x, cos_t, sin_t);
  return cat({narrow(x, -1, 0, d - rot), apply_rotary(narrow(x, -1, d - rot, rot), cos_t, sin_t)},
             -1);
}

// The first `rows` positions of a [1, S, rot] table: the entries' positions are within the
// sequence (entry w sits at token w m), and the table's values are not modelled.
Tensor first_positions(const Tensor& table, int64_t rows) { return narrow(table, 1, 0, rows); }

// Note [Compressed attention trace]: the pooling shared by the compressors and the indexer's own
// compressor. `self` holds position_bias, kv_proj, gate_proj and kv_norm; x [B, S, h] -> the
// entries [B, 1, S / rate, dim], rotated, or an undefined tensor when the sequence is shorter
// than one window (transformers then attends the window alone).
Tensor pool_entries(Module& self, const Tensor& x, int64_t rate, int64_t dim, bool overlap,
                    const Tensor& cos_t, const Tensor& sin_t) {
  const int64_t b = x.size(0), s = x.size(1), entries = s / rate, width = overlap ? 2 * dim : dim;
  Tensor kv = self.child("kv_proj")->call(x);
  Tensor gate = self.child("gate_proj")->call(x);
  if (entries == 0) return Tensor();
  kv = view(narrow(kv, 1, 0, entries * rate), {b, entries, rate, width});
  gate = add(view(narrow(gate, 1, 0, entries * rate), {b, entries, rate, width}),
             self.parameter("position_bias"));
  if (overlap) {
    // The two series of each window as 2 rate slots of dim channels (entry w's first half is
    // window w - 1's first series: a shift that changes no shape or work).
    kv = cat({narrow(kv, -1, 0, dim), narrow(kv, -1, dim, dim)}, 2);
    gate = cat({narrow(gate, -1, 0, dim), narrow(gate, -1, dim, dim)}, 2);
  }
  const Tensor weights = to(softmax(gate, 2, DType::kFloat32), x.dtype());
  const Tensor pooled = self.child("kv_norm")->call(sum(mul(kv, weights), {2}));
  return rotate_trailing(split_heads(pooled, 1, dim), first_positions(cos_t, entries),
                         first_positions(sin_t, entries));
}

// DeepseekV4IndexerScorer: the per-query weights of the indexer's heads.
class IndexerScorer : public Module {
 public:
  IndexerScorer(const ModelConfig& c, const TensorOptions& o)
      : Module(std::string(kPrefix) + "IndexerScorer") {
    register_module("weights_proj",
                    std::make_shared<Linear>(c.hidden_size, c.index_n_heads, false, o));
  }
  Tensor forward(const Tensor& x) override { return child("weights_proj")->call(x); }
};

// DeepseekV4Indexer (Note [Compressed attention trace]).
class Indexer : public Module {
 public:
  Indexer(const ModelConfig& c, int64_t rot, const TensorOptions& o)
      : Module(std::string(kPrefix) + "Indexer"),
        heads_(c.index_n_heads),
        dim_(c.index_head_dim),
        rate_(c.compress_rate_csa) {
    const int64_t h = c.hidden_size;
    register_parameter("position_bias", empty({rate_, 2 * dim_}, o));
    register_module("kv_proj", std::make_shared<Linear>(h, 2 * dim_, false, o));
    register_module("gate_proj", std::make_shared<Linear>(h, 2 * dim_, false, o));
    register_module("kv_norm", rms_norm_of(dim_, c.norm_eps, o));
    register_module("q_b_proj", std::make_shared<Linear>(c.q_lora_rank, heads_ * dim_, false, o));
    register_module("rotary_emb", std::make_shared<RotaryEmbedding>(
                                      std::string(kPrefix) + "RotaryEmbedding", rot, 0.0));
    register_module("scorer", std::make_shared<IndexerScorer>(c, o));
  }

  // x [B, S, h], q_latent [B, S, q]: each query's score of every entry, [B, S, 1] summed over
  // the heads (what the top-k selection reads).
  void run(const Tensor& x, const Tensor& q_latent, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor keys = pool_entries(*this, x, rate_, dim_, /*overlap=*/true, cos_t, sin_t);
    const Tensor q =
        rotate_trailing(split_heads(child("q_b_proj")->call(q_latent), heads_, dim_), cos_t, sin_t);
    const Tensor w = child("scorer")->call(x);  // [B, S, i]
    if (!keys.defined()) return;
    const Tensor scores = scaled_dot_product_attention(q, keys, narrow(keys, -1, 0, 1), Tensor(),
                                                       0.0, false, {}, /*enable_gqa=*/true);
    (void)sum(mul(scores, unsqueeze(transpose(w, 1, 2), -1)), {1});
  }

 private:
  int64_t heads_, dim_, rate_;
};

// DeepseekV4CSACompressor (overlapping windows, with the indexer) or DeepseekV4HCACompressor.
class Compressor : public Module {
 public:
  Compressor(const ModelConfig& c, bool sparse, int64_t rot, const TensorOptions& o)
      : Module(std::string(kPrefix) + (sparse ? "CSACompressor" : "HCACompressor")),
        dim_(c.head_dim),
        rate_(sparse ? c.compress_rate_csa : c.compress_rate_hca),
        overlap_(sparse) {
    const int64_t h = c.hidden_size, width = sparse ? 2 * dim_ : dim_;
    register_parameter("position_bias", empty({rate_, width}, o));
    register_module("kv_proj", std::make_shared<Linear>(h, width, false, o));
    register_module("gate_proj", std::make_shared<Linear>(h, width, false, o));
    register_module("kv_norm", rms_norm_of(dim_, c.norm_eps, o));
    register_module("rotary_emb", std::make_shared<RotaryEmbedding>(
                                      std::string(kPrefix) + "RotaryEmbedding", rot, 0.0));
    if (sparse) indexer_ = register_module("indexer", std::make_shared<Indexer>(c, rot, o));
  }

  // The layer's entries [B, 1, S / rate, d] (undefined below one window); the indexer scores
  // them for each query.
  Tensor run(const Tensor& x, const Tensor& q_latent, const Tensor& cos_t, const Tensor& sin_t) {
    CallScope scope(*this);
    const Tensor entries = pool_entries(*this, x, rate_, dim_, overlap_, cos_t, sin_t);
    if (indexer_) indexer_->run(x, q_latent, cos_t, sin_t);
    return entries;
  }

 private:
  int64_t dim_, rate_;
  bool overlap_;
  std::shared_ptr<Indexer> indexer_;
};

// DeepseekV4GroupedLinear (an nn.Linear subclass there too, so that tensor parallelism splits it
// as one): weight [g r, in / g] read as g blocks [r, in / g], block j applied to the j-th slice
// of in: one batched GEMM over the groups.
class GroupedLinear : public Linear {
 public:
  GroupedLinear(int64_t in, int64_t out, int64_t groups, const TensorOptions& o)
      : Linear(in / groups, out, false, o), groups_(groups) {}
  Tensor forward(const Tensor& x) override {
    const Tensor w = weight();
    const int64_t b = x.size(0), s = x.size(1), per_in = w.size(1), per_out = w.size(0) / groups_;
    const Tensor groups = transpose(view(x, {b * s, groups_, per_in}), 0, 1);  // [g, BS, in/g]
    const Tensor y = bmm(groups, transpose(view(w, {groups_, per_out, per_in}), 1, 2));
    return reshape(transpose(y, 0, 1), {b, s, groups_ * per_out});
  }

 private:
  int64_t groups_;
};

class CompressedAttention : public AttentionBlock {
 public:
  CompressedAttention(const ModelConfig& c, const LayerKind& kind, const TensorOptions& o,
                      bool training)
      : AttentionBlock(std::string(kPrefix) + "Attention"),
        heads_(c.num_attention_heads),
        dim_(c.head_dim),
        eps_(c.norm_eps),
        window_(kind.window),
        rate_(kind.compress_rate),
        all_entries_(kind.attention == AttentionType::kHeavilyCompressed),
        dropout_(training ? c.attention_dropout : 0.0) {
    const int64_t h = c.hidden_size, q = c.q_lora_rank, rot = rotary_dim(c);
    register_parameter("sinks", empty({heads_}, o));
    register_module("q_a_proj", std::make_shared<Linear>(h, q, false, o));
    register_module("q_a_norm", rms_norm_of(q, eps_, o));
    register_module("q_b_proj", std::make_shared<Linear>(q, heads_ * dim_, false, o));
    register_module("kv_proj", std::make_shared<Linear>(h, dim_, false, o));
    register_module("kv_norm", rms_norm_of(dim_, eps_, o));
    register_module("o_a_proj", std::make_shared<GroupedLinear>(
                                    heads_ * dim_, c.o_groups * c.o_lora_rank, c.o_groups, o));
    register_module("o_b_proj", std::make_shared<Linear>(c.o_groups * c.o_lora_rank, h, false, o));
    if (rate_ > 0) {
      compressor_ = register_module(
          "compressor", std::make_shared<Compressor>(
                            c, kind.attention == AttentionType::kCompressedSparse, rot, o));
    }
  }

  Tensor run(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) override {
    CallScope scope(*this);
    // Queries through the latent (kept for the indexer), each head RMS-normalized without a
    // weight, rotated on its last channels.
    const Tensor q_latent = child("q_a_norm")->call(child("q_a_proj")->call(x));
    Tensor q = split_heads(child("q_b_proj")->call(q_latent), heads_, dim_);
    q = rotate_trailing(rms_norm(q, {dim_}, Tensor(), eps_), cos_t, sin_t);
    // The one head that is both key and value.
    Tensor kv = rotate_trailing(
        split_heads(child("kv_norm")->call(child("kv_proj")->call(x)), 1, dim_), cos_t, sin_t);
    int64_t keys_per_query = window_;
    Tensor entries;
    if (compressor_) entries = compressor_->run(x, q_latent, cos_t, sin_t);
    if (entries.defined()) {
      if (all_entries_) keys_per_query += entries.size(2);
      kv = cat({kv, entries}, 2);
    }
    Tensor out = scaled_dot_product_attention(q, kv, kv, Tensor(), dropout_,
                                              /*is_causal=*/!entries.defined(), {},
                                              /*enable_gqa=*/true, keys_per_query);
    // The values carried RoPE: rotate the output back.
    out = rotate_trailing(out, cos_t, neg(sin_t));
    return child("o_b_proj")->call(child("o_a_proj")->call(merge_heads(out)));
  }

 private:
  int64_t heads_, dim_;
  double eps_;
  int64_t window_, rate_;
  bool all_entries_;
  double dropout_;
  std::shared_ptr<Compressor> compressor_;
};

}  // namespace

std::shared_ptr<AttentionBlock> make_compressed_attention(const ModelConfig& c,
                                                          const LayerKind& kind,
                                                          const TensorOptions& o, bool training) {
  return std::make_shared<CompressedAttention>(c, kind, o, training);
}

}  // namespace shardplan::tensor::models
