// Muse Glimmer's tensor-parallel plan (tensor/models/family_muse_glimmer_text.cpp) and its
// pipeline stages, whose layers sit under model.language_model.layers (the family's layers_path),
// against counts written out by hand from the shipped config (configs/models/muse-glimmer.json:
// h 6,656, 52 layers of 32 heads and 2 KV heads of 128, the output gate as wide as q, MLP 19,968,
// vocabulary 202,048 untied).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "planner/candidate/parallel_dims.h"
#include "planner/cost/tensor_parallel.h"
#include "tensor/models/model_config.h"

namespace shardplan::planner {
namespace {

// On 2 ranks: q, k, v, the gate and o_proj split by heads, the MLP by its width, embedding and
// output layer by vocabulary rows; the four (1 + w) norms and the final norm replicated.
//   layer  (3 x 6,656 x 4,096 + 2 x 6,656 x 256 + 3 x 6,656 x 19,968) / 2 = 241,958,912
//          + norms 4 x 6,656 = 26,624: 241,985,536; x 52 = 12,583,247,872
//   embed_tokens and lm_head 2 x 202,048 x 6,656 / 2 = 1,344,831,488; norm 6,656
//   12,583,247,872 + 1,344,831,488 + 6,656 = 13,928,086,016
TEST(MuseGlimmerTextTensorParallel, TwoRanksSplitHeadsGateMlpAndVocabulary) {
  const tensor::ModelConfig c = tensor::find_model_config("muse-glimmer");
  EXPECT_EQ(tp_rank_parameters(c, 1), 27'854'780'928);  // the whole language model
  EXPECT_EQ(tp_rank_parameters(c, 2), 13'928'086'016);
  EXPECT_EQ(tp_rank_parameters(c, 2, 1), 13'928'086'016);  // even splits: both ranks alike
  EXPECT_EQ(expert_parameters_per_layer(c, 2), 0);         // dense
}

// Two stages of 26 layers (483,944,448 each): the embedding before the layers on the first, the
// final norm and the output layer after them on the last.
//   stage 0  202,048 x 6,656 + 26 x 483,944,448 = 1,344,831,488 + 12,582,555,648
//   stage 1  26 x 483,944,448 + 6,656 + 1,344,831,488
TEST(MuseGlimmerTextTensorParallel, PipelineStagesFindTheLayersUnderTheLanguageModel) {
  const tensor::ModelConfig c = tensor::find_model_config("muse-glimmer");
  EXPECT_EQ(stage_parameters(c, 1, 2), (std::vector<int64_t>{13'927'387'136, 13'927'393'792}));
}

// tp must divide the 32 heads, and divide the 2 KV heads or be a multiple of them.
TEST(MuseGlimmerTextTensorParallel, TpDividesTheHeads) {
  const tensor::ModelConfig c = tensor::find_model_config("muse-glimmer");
  const TrainingSetup s{.gpus = 64, .seq = 4096, .global_batch = 64};
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 2), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 8), "");
  EXPECT_EQ(dim(kTpDim).refuses(c, s, 64),
            "--tp 64 does not divide the model's 32 attention heads, expected a divisor of 32");
}

}  // namespace
}  // namespace shardplan::planner
