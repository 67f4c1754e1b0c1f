// What autograd saves for the backward of each traced op (Note [Saved-tensor rules]), as a table
// from op name to rule; training.cpp applies the rules to a recorded step. Also the one list of
// matrix-product ops (the rows whose rule is kProduct).
//   std::optional<Rule> r = saved_tensor_rule("linear");  // Rule::kProduct
//   is_matmul_op("bmm");                                    // true
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shardplan::tensor {

// Note [Saved-tensor rules]
// What PyTorch's autograd saves for each op's backward (tools/autograd/derivatives.yaml and the
// fused kernels' forward outputs). Parameters among the saved inputs are saved by reference and
// are not activation memory (Note [Saved tensors and activation memory]).
enum class Rule : uint8_t {
  kNothing,         // backward needs only shapes (or nothing)
  kInputs,          // all tensor inputs
  kProduct,         // the two factors of a matrix product (not the added bias)
  kFirstInput,      // input 0 only
  kOutput,          // the result
  kTensorOperands,  // both operands when both are tensors; nothing with a Python-number operand
  kDropout,         // a 1-byte mask per element
  kLayerNorm,       // input + fp32 mean and rstd per row
  kRmsNorm,         // input + fp32 rstd per row
  kSdpa,            // AttentionImpl decides
  kCrossEntropy,    // log-probabilities (input's shape and dtype) + target
  kEmbedding,       // the indices
  kWhere,           // the boolean condition
  kGatedDelta,  // q, k, v, g, beta and the chunks' solved systems (Note [Gated delta rule work])
  kMambaScan,   // zxbcdt, the scan's output before its gated norm, rstd (Note [Mamba-2 scan work])
  // Mamba-1's u, delta, B, C, z, the output before the gate and the chunks' states (Note [Mamba-1
  // scan work]).
  kSelectiveScan,
  kLightning,   // q, k, v, the decays; the rest recomputed (Note [Lightning attention work])
  kLinearScan,  // the decays a (input 0) and the output h (Note [Linear scan work])
  kWkv,         // w, u, k, v and the output (Note [WKV work])
  kMlstm,  // q, k, v, the gates, the fp32 normalizer and max state (Note [mLSTM chunkwise work])
};

// The rule of `op`, nullopt for an op the table does not know (the caller saves its inputs).
std::optional<Rule> saved_tensor_rule(std::string_view op);

// A matrix product (grad_a = g b^T, grad_b = a^T g): exactly the ops whose rule is kProduct.
bool is_matmul_op(std::string_view op);

}  // namespace shardplan::tensor
