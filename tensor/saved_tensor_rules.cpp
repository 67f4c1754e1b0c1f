#include "tensor/saved_tensor_rules.h"

#include <unordered_map>

namespace shardplan::tensor {
namespace {

const std::unordered_map<std::string_view, Rule>& rule_table() {
  static const std::unordered_map<std::string_view, Rule> table = {
      // Matrix products: grad_a = g b^T needs b, grad_b = a^T g needs a (the bias needs nothing).
      {"linear", Rule::kProduct},   // input and weight (weight is a parameter: not counted)
      {"matmul", Rule::kProduct},   // both operands (Q K^T saves Q and K)
      {"mm", Rule::kProduct},       // both operands
      {"bmm", Rule::kProduct},      // both operands
      {"addmm", Rule::kProduct},    // mat1, mat2 (the bias input is listed but is a parameter)
      {"baddbmm", Rule::kProduct},  // batch1, batch2 (and the added tensor, by reference)
      // Pointwise with a derivative that needs an input.
      {"gelu", Rule::kFirstInput},     // GeluBackward: self
      {"silu", Rule::kFirstInput},     // SiluBackward: self
      {"xielu", Rule::kFirstInput},    // the fused kernel: x (its two parameters are not counted)
      {"log", Rule::kFirstInput},      // 1/self
      {"sin", Rule::kFirstInput},      // cos(self)
      {"cos", Rule::kFirstInput},      // -sin(self)
      {"square", Rule::kFirstInput},   // 2 self
      {"abs", Rule::kFirstInput},      // sign(self)
      {"pow", Rule::kTensorOperands},  // self (and exponent when it is a tensor)
      {"mul", Rule::kTensorOperands},  // grad_a = g*b, grad_b = g*a; a Python number saves nothing
      {"div", Rule::kTensorOperands},  // grad_a = g/b, grad_b = -g*a/b^2
      {"maximum", Rule::kInputs},      // both, to route the gradient
      {"minimum", Rule::kInputs},      // both
      {"atan2", Rule::kInputs},        // both
      // Pointwise whose derivative is a function of the result.
      {"relu", Rule::kOutput},         // result > 0
      {"tanh", Rule::kOutput},         // 1 - result^2
      {"sigmoid", Rule::kOutput},      // result (1 - result)
      {"exp", Rule::kOutput},          // result
      {"sqrt", Rule::kOutput},         // 1 / (2 result)
      {"rsqrt", Rule::kOutput},        // -result^3 / 2
      {"reciprocal", Rule::kOutput},   // -result^2
      {"softmax", Rule::kOutput},      // SoftmaxBackward: result
      {"log_softmax", Rule::kOutput},  // LogSoftmaxBackward: result
      // Linear in their inputs: the gradient passes through (or is summed/reshaped).
      {"add", Rule::kNothing},         // AddBackward: alpha only
      {"sub", Rule::kNothing},         // SubBackward: alpha only
      {"neg", Rule::kNothing},         // -g
      {"sum", Rule::kNothing},         // expand g to the input's shape
      {"mean", Rule::kNothing},        // expand g / n
      {"cat", Rule::kNothing},         // split g by the inputs' sizes
      {"to", Rule::kNothing},          // cast g back
      {"contiguous", Rule::kNothing},  // a copy: g as is
      {"reshape", Rule::kNothing},     // (the copying case) view g back
      {"stack", Rule::kNothing},       // unbind g
      // Fused or composite kernels with saved forward outputs of their own.
      {"dropout", Rule::kDropout},       // native_dropout saves its bool mask
      {"layer_norm", Rule::kLayerNorm},  // native_layer_norm: input, weight, bias, mean, rstd
      {"rms_norm", Rule::kRmsNorm},  // fused RMSNorm (apex / torch._fused_rms_norm): input, rstd
      {"scaled_dot_product_attention", Rule::kSdpa},
      {"chunk_gated_delta_rule", Rule::kGatedDelta},
      {"mamba_split_conv1d_scan_combined", Rule::kMambaScan},
      {"selective_scan_fn", Rule::kSelectiveScan},
      {"lightning_attention", Rule::kLightning},
      {"linear_scan", Rule::kLinearScan},      // the reverse scan reads a and h_{t-1}
      {"wkv", Rule::kWkv},                     // RwkvLinearAttention: w, u, k, v, output
      {"mlstm_chunkwise", Rule::kMlstm},       // the inputs, fp32 normalizer and max state
      {"conv1d", Rule::kInputs},               // ConvolutionBackward: input and weight
      {"cross_entropy", Rule::kCrossEntropy},  // log_softmax result + nll_loss target
      {"embedding", Rule::kEmbedding},         // EmbeddingBackward: indices (an input: not counted)
      {"where", Rule::kWhere},                 // the condition (bool)
      {"amax", Rule::kInputs},                 // self and result, to find the maxima
      {"amin", Rule::kInputs},
      {"var", Rule::kFirstInput},  // self (and the mean it recomputes)
  };
  return table;
}

}  // namespace

std::optional<Rule> saved_tensor_rule(std::string_view op) {
  const auto it = rule_table().find(op);
  if (it == rule_table().end()) return std::nullopt;
  return it->second;
}

bool is_matmul_op(std::string_view op) { return saved_tensor_rule(op) == Rule::kProduct; }

}  // namespace shardplan::tensor
