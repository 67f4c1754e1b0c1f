#include "tensor/models/model_config.h"

#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "tensor/base/checked.h"
#include "tensor/base/config_paths.h"
#include "tensor/base/error.h"
#include "tensor/base/file_io.h"
#include "tensor/base/strict_json.h"
#include "tensor/models/blocks.h"

namespace shardplan::tensor {
namespace {

using nlohmann::json;

// The rotary families share one decoder (tensor/models/llama.cpp); gpt2 and gpt_neox have their
// own.
constexpr const char* kModelTypes[] = {"gemma",   "gpt2",    "gpt_neox", "llama",
                                       "mistral", "mixtral", "qwen2"};

bool is_rotary(std::string_view t) { return t != "gpt2"; }

// Typed access to one config document; every error names the source and the field
// (Note [Strict config parsing]).
class Fields {
 public:
  Fields(const json& j, std::string_view source) : j_(j), source_(source) {}

  [[noreturn]] void fail(std::string_view field, const std::string& what) const {
    SP_FAIL(source_, ": field '", field, "': ", what);
  }
  // Present and not null.
  bool has(const char* f) const { return j_.contains(f) && !j_.at(f).is_null(); }

  int64_t integer(const char* f) const {
    if (!has(f)) fail(f, "missing; it is required for this model_type");
    return as_int(f, j_.at(f));
  }
  int64_t integer(const char* f, int64_t dflt) const { return has(f) ? integer(f) : dflt; }
  std::optional<int64_t> opt_integer(const char* f) const {
    return has(f) ? std::optional<int64_t>(integer(f)) : std::nullopt;
  }
  double number(const char* f, double dflt) const {
    if (!has(f)) return dflt;
    const json& v = j_.at(f);
    if (!v.is_number()) fail(f, "expected a number, got " + v.dump());
    return v.get<double>();
  }
  bool boolean(const char* f, bool dflt) const {
    if (!has(f)) return dflt;
    const json& v = j_.at(f);
    if (!v.is_boolean()) fail(f, "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string string(const char* f, std::string dflt) const {
    if (!has(f)) return dflt;
    const json& v = j_.at(f);
    if (!v.is_string()) fail(f, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  const json& raw(const char* f) const { return j_.at(f); }

 private:
  int64_t as_int(std::string_view f, const json& v) const {
    // 4096.0 is accepted (some exporters write floats); 4096.5 and "4096" are not.
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9.0e15) {
        return static_cast<int64_t>(d);
      }
    }
    fail(f, "expected an integer, got " + v.dump());
  }

  const json& j_;
  std::string_view source_;
};

RopeScaling parse_rope_scaling(const Fields& top, std::string_view source) {
  const json& r = top.raw("rope_scaling");
  if (!r.is_object()) top.fail("rope_scaling", "expected an object or null, got " + r.dump());
  const Fields f(r, source);
  RopeScaling s;
  // transformers reads "rope_type" and, for old configs, "type".
  s.rope_type = f.has("rope_type") ? f.string("rope_type", "") : f.string("type", "");
  auto bad = [&](const std::string& what) { top.fail("rope_scaling", what); };
  if (s.rope_type.empty()) bad("missing 'rope_type' (or 'type')");
  if (s.rope_type != "linear" && s.rope_type != "dynamic" && s.rope_type != "yarn" &&
      s.rope_type != "longrope" && s.rope_type != "llama3") {
    bad("rope_type '" + s.rope_type +
        "' is not supported; expected one of linear, dynamic, yarn, longrope, llama3");
  }
  if (s.rope_type != "longrope" && !f.has("factor")) bad("missing 'factor'");
  s.factor = f.number("factor", 1.0);
  if (!(s.factor >= 1.0)) bad("factor must be >= 1, got " + std::to_string(s.factor));
  s.original_max_position_embeddings = f.opt_integer("original_max_position_embeddings");
  if (s.rope_type == "llama3") {
    // transformers' _validate_llama3_parameters.
    for (const char* k :
         {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      if (!f.has(k)) bad(std::string("rope_type llama3 needs '") + k + "'");
    }
    s.low_freq_factor = f.number("low_freq_factor", 0);
    s.high_freq_factor = f.number("high_freq_factor", 0);
    if (!(*s.low_freq_factor > 0 && *s.high_freq_factor > *s.low_freq_factor)) {
      bad("llama3 needs 0 < low_freq_factor < high_freq_factor, got " +
          std::to_string(*s.low_freq_factor) + " and " + std::to_string(*s.high_freq_factor));
    }
  }
  if (s.original_max_position_embeddings && *s.original_max_position_embeddings <= 0) {
    bad("original_max_position_embeddings must be positive");
  }
  return s;
}

// Llama, Mistral, Mixtral, Qwen2, Gemma: the HF LlamaConfig field names and family defaults.
void parse_llama_like(const Fields& f, ModelConfig& c, std::string_view source) {
  const std::string& t = c.model_type;
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  if (!f.has("head_dim")) {
    if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
      f.fail("num_attention_heads",
             std::to_string(c.num_attention_heads) + " does not divide hidden_size " +
                 std::to_string(c.hidden_size) + " (and no head_dim is given)");
    }
  }
  c.head_dim =
      f.integer("head_dim", c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  // Defaults of the HF config classes (LlamaConfig 2048, MistralConfig 4096*32, ...).
  const int64_t dflt_pos = t == "llama"   ? 2048
                           : t == "gemma" ? 8192
                           : t == "qwen2" ? 32768
                                          : 131072;
  c.max_position_embeddings = f.integer("max_position_embeddings", dflt_pos);
  // Gemma runs gelu with the tanh approximation whatever hidden_act says (GemmaMLP); a newer
  // hidden_activation field names it explicitly.
  c.hidden_act = t == "gemma" ? f.string("hidden_activation", "gelu_pytorch_tanh")
                              : f.string("hidden_act", "silu");
  c.norm_eps = f.number("rms_norm_eps", t == "mixtral" ? 1e-5 : 1e-6);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", t == "gemma");
  if (t == "qwen2") {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without
  } else if (t == "llama" || t == "gemma") {
    c.qkv_bias = c.o_bias = f.boolean("attention_bias", false);
  }
  if (t == "llama") c.mlp_bias = f.boolean("mlp_bias", false);
  c.rope_theta = f.number("rope_theta", t == "mixtral" ? 1e6 : 10000.0);
  if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f, source);
  if ((t == "mistral" || t == "mixtral") ||
      (t == "qwen2" && f.boolean("use_sliding_window", false))) {
    c.sliding_window = f.opt_integer("sliding_window");
  }
  if (t == "mixtral") {
    c.num_local_experts = f.integer("num_local_experts");
    c.num_experts_per_tok = f.integer("num_experts_per_tok");
  }
  c.attention_dropout = f.number("attention_dropout", 0.0);
}

void parse_gpt2(const Fields& f, ModelConfig& c) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("n_embd");
  c.num_hidden_layers = f.integer("n_layer");
  c.num_attention_heads = f.integer("n_head");
  c.num_key_value_heads = c.num_attention_heads;
  c.max_position_embeddings = f.integer("n_positions");
  // n_inner: null or absent means 4 * n_embd (GPT2MLP). (validate reports n_embd <= 0.)
  int64_t default_inner = 0;
  if (!f.has("n_inner") && !mul_into(c.hidden_size, 4, default_inner) && c.hidden_size > 0) {
    f.fail("n_embd", std::to_string(c.hidden_size) +
                         " is too large for the default n_inner = 4 * n_embd, expected at most " +
                         std::to_string(INT64_MAX / 4) + " or an explicit n_inner");
  }
  c.intermediate_size = f.integer("n_inner", default_inner);
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("n_head", std::to_string(c.num_attention_heads) + " does not divide n_embd " +
                         std::to_string(c.hidden_size));
  }
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.hidden_act = f.string("activation_function", "gelu_new");
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.qkv_bias = c.o_bias = c.mlp_bias = true;  // Conv1D always has a bias
  c.partial_rotary_factor = 0;                // learned positions, no rotary
  c.embd_dropout = f.number("embd_pdrop", 0.1);
  c.attention_dropout = f.number("attn_pdrop", 0.1);
  c.resid_dropout = f.number("resid_pdrop", 0.1);
}

void parse_gpt_neox(const Fields& f, ModelConfig& c, std::string_view source) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_hidden_layers = f.integer("num_hidden_layers");
  c.num_attention_heads = f.integer("num_attention_heads");
  c.num_key_value_heads = c.num_attention_heads;
  if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("num_attention_heads", std::to_string(c.num_attention_heads) +
                                      " does not divide hidden_size " +
                                      std::to_string(c.hidden_size));
  }
  c.head_dim = c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.max_position_embeddings = f.integer("max_position_embeddings", 2048);
  c.hidden_act = f.string("hidden_act", "gelu");
  c.norm_eps = f.number("layer_norm_eps", 1e-5);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.qkv_bias = c.o_bias = f.boolean("attention_bias", true);
  c.mlp_bias = true;
  // Older configs say rotary_pct / rotary_emb_base, newer ones partial_rotary_factor / rope_theta.
  c.partial_rotary_factor = f.has("partial_rotary_factor") ? f.number("partial_rotary_factor", 0.25)
                                                           : f.number("rotary_pct", 0.25);
  c.rope_theta =
      f.has("rope_theta") ? f.number("rope_theta", 10000.0) : f.number("rotary_emb_base", 10000.0);
  if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f, source);
  c.use_parallel_residual = f.boolean("use_parallel_residual", true);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  c.resid_dropout = f.number("hidden_dropout", 0.0);
}

std::string join(const char* sep) {
  std::string s;
  for (const char* t : kModelTypes) s += (s.empty() ? "" : sep) + std::string(t);
  return s;
}

}  // namespace

std::vector<std::string> supported_model_types() {
  return {std::begin(kModelTypes), std::end(kModelTypes)};
}

namespace {

// The config.json key that holds ModelConfig's `field` in a `type` file, so that an error names
// what the user finds in the file (GPT-2 says n_embd, not hidden_size); `field` itself where the
// families agree.
std::string_view file_field(std::string_view type, std::string_view field) {
  static constexpr std::array<std::array<std::string_view, 3>, 14> kRenamed = {{
      {"gpt2", "hidden_size", "n_embd"},
      {"gpt2", "intermediate_size", "n_inner"},
      {"gpt2", "num_hidden_layers", "n_layer"},
      {"gpt2", "num_attention_heads", "n_head"},
      {"gpt2", "num_key_value_heads", "n_head"},  // derived: kv heads = heads
      {"gpt2", "head_dim", "n_head"},             // derived: n_embd / n_head
      {"gpt2", "max_position_embeddings", "n_positions"},
      {"gpt2", "norm_eps", "layer_norm_epsilon"},
      {"gpt2", "embd_dropout", "embd_pdrop"},
      {"gpt2", "attention_dropout", "attn_pdrop"},
      {"gpt2", "resid_dropout", "resid_pdrop"},
      {"gpt_neox", "norm_eps", "layer_norm_eps"},
      {"gpt_neox", "resid_dropout", "hidden_dropout"},
      {"gpt_neox", "partial_rotary_factor", "rotary_pct"},
  }};
  for (const auto& [t, from, to] : kRenamed) {
    if (t == type && from == field) return to;
  }
  // The rotary families other than GPT-NeoX spell the norm epsilon rms_norm_eps.
  if (field == "norm_eps" && is_rotary(type)) return "rms_norm_eps";
  return field;
}

}  // namespace

void validate(const ModelConfig& c, std::string_view source) {
  auto fail = [&](std::string_view field, const auto&... what) {
    // A renamed key also says ModelConfig's name, for configs built in code.
    const std::string_view key = file_field(c.model_type, field);
    if (key == field) SP_FAIL(source, ": field '", field, "': ", what...);
    SP_FAIL(source, ": field '", key, "' (", field, "): ", what...);
  };
  bool known = false;
  for (const char* t : kModelTypes) known = known || c.model_type == t;
  if (!known)
    fail("model_type", "'", c.model_type, "' is not supported; expected one of: ", join(", "));
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [name, v] : sizes) {
    if (v <= 0) fail(name, "must be a positive integer, got ", v);
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    fail("num_key_value_heads", c.num_key_value_heads, " does not divide num_attention_heads ",
         c.num_attention_heads);
  }
  // Fused-qkv families (GPT-2, GPT-NeoX) split hidden_size across the heads.
  const bool fused_qkv = c.model_type == "gpt2" || c.model_type == "gpt_neox";
  int64_t qkv_width = 0;  // checked: validate also sees configs built in code
  if (fused_qkv && (!mul_into(c.head_dim, c.num_attention_heads, qkv_width) ||
                    qkv_width != c.hidden_size)) {
    fail("num_attention_heads", c.num_attention_heads, " heads of ", c.head_dim,
         " do not make hidden_size ", c.hidden_size);
  }
  if (is_rotary(c.model_type)) {
    if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1)) {
      fail("partial_rotary_factor", "must be in (0, 1], got ", c.partial_rotary_factor);
    }
    // Rotary rotates pairs: the rotated width int(head_dim * factor) must be even (HF GPT-NeoX).
    const auto rot =
        static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
    if (rot <= 0 || rot % 2 != 0) {
      fail("head_dim", "the rotary width head_dim * partial_rotary_factor = ", rot,
           " must be a positive even number");
    }
    if (!(c.rope_theta > 0)) fail("rope_theta", "must be positive, got ", c.rope_theta);
  }
  if (!models::known_activation(c.hidden_act)) {
    fail(c.model_type == "gpt2" ? "activation_function" : "hidden_act", "'", c.hidden_act,
         "' is not supported; expected one of: ", models::known_activations());
  }
  if (!(c.norm_eps > 0)) fail("norm_eps", "must be positive, got ", c.norm_eps);
  const std::pair<const char*, double> drops[] = {{"embd_dropout", c.embd_dropout},
                                                  {"attention_dropout", c.attention_dropout},
                                                  {"resid_dropout", c.resid_dropout}};
  for (const auto& [name, p] : drops) {
    if (!(p >= 0 && p < 1)) fail(name, "a dropout probability must be in [0, 1), got ", p);
  }
  if (c.model_type == "mixtral" || c.num_local_experts != 0) {
    if (c.num_local_experts <= 0)
      fail("num_local_experts", "must be positive, got ", c.num_local_experts);
    if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_local_experts) {
      fail("num_experts_per_tok", "must be in [1, num_local_experts = ", c.num_local_experts,
           "], got ", c.num_experts_per_tok);
    }
  }
  if (c.sliding_window && *c.sliding_window <= 0) {
    fail("sliding_window", "must be positive, got ", *c.sliding_window);
  }
  if (!is_floating(c.torch_dtype))
    fail("torch_dtype", "must be a floating dtype, got ", c.torch_dtype);
  // The parameter count must fit int64 with room to spare: bound it in floating point first.
  const double h = static_cast<double>(c.hidden_size);
  const double experts = static_cast<double>(std::max<int64_t>(1, c.num_local_experts));
  // Every product and sum in double: heads * head_dim or vocab + positions may not fit int64.
  const double per_layer = 4.0 * h * static_cast<double>(c.num_attention_heads) *
                               static_cast<double>(c.head_dim) +
                           3.0 * h * static_cast<double>(c.intermediate_size) * experts;
  const double total = static_cast<double>(c.num_hidden_layers) * per_layer +
                       2.0 * h *
                           (static_cast<double>(c.vocab_size) +
                            static_cast<double>(c.max_position_embeddings));
  if (!(total < 1e18)) {
    fail("hidden_size", "the model would hold about ", total,
         " parameters, beyond what shardplan counts exactly (1e18)");
  }
}

ModelConfig parse_model_config(const json& j, std::string_view source) {
  SP_CHECK(j.is_object(), source, ": expected a JSON object (a Hugging Face config.json), got ",
           j.type_name());
  const Fields f(j, source);
  ModelConfig c;
  if (!f.has("model_type")) {
    f.fail("model_type", "missing; expected one of: " + join(", "));
  }
  c.model_type = f.string("model_type", "");
  bool known = false;
  for (const char* t : kModelTypes) known = known || c.model_type == t;
  if (!known) {
    f.fail("model_type", "'" + c.model_type + "' is not supported; expected one of: " + join(", "));
  }
  if (c.model_type == "gpt2") {
    parse_gpt2(f, c);
  } else if (c.model_type == "gpt_neox") {
    parse_gpt_neox(f, c, source);
  } else {
    parse_llama_like(f, c, source);
  }
  if (f.has("torch_dtype")) {
    const std::string name = f.string("torch_dtype", "");
    if (!try_parse_dtype(name, &c.torch_dtype) || !is_floating(c.torch_dtype)) {
      f.fail("torch_dtype",
             "'" + name + "' is not a floating dtype (float32, bfloat16, float16, ...)");
    }
  }
  validate(c, source);
  return c;
}

json to_hf_json(const ModelConfig& c) {
  json j;
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["torch_dtype"] = std::string(dtype_name(c.torch_dtype));
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  auto rope = [&] {
    if (!c.rope_scaling) return json(nullptr);
    const RopeScaling& s = *c.rope_scaling;
    json r = {{"rope_type", s.rope_type}, {"factor", s.factor}};
    if (s.low_freq_factor) r["low_freq_factor"] = *s.low_freq_factor;
    if (s.high_freq_factor) r["high_freq_factor"] = *s.high_freq_factor;
    if (s.original_max_position_embeddings) {
      r["original_max_position_embeddings"] = *s.original_max_position_embeddings;
    }
    return r;
  };
  if (c.model_type == "gpt2") {
    j["n_embd"] = c.hidden_size;
    j["n_layer"] = c.num_hidden_layers;
    j["n_head"] = c.num_attention_heads;
    j["n_positions"] = c.max_position_embeddings;
    j["n_inner"] = c.intermediate_size;
    j["activation_function"] = c.hidden_act;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["embd_pdrop"] = c.embd_dropout;
    j["attn_pdrop"] = c.attention_dropout;
    j["resid_pdrop"] = c.resid_dropout;
    return j;
  }
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope();
  j["attention_dropout"] = c.attention_dropout;
  if (c.model_type == "gpt_neox") {
    j["hidden_act"] = c.hidden_act;
    j["layer_norm_eps"] = c.norm_eps;
    j["attention_bias"] = c.qkv_bias;
    j["partial_rotary_factor"] = c.partial_rotary_factor;
    j["use_parallel_residual"] = c.use_parallel_residual;
    j["hidden_dropout"] = c.resid_dropout;
    return j;
  }
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j[c.model_type == "gemma" ? "hidden_activation" : "hidden_act"] = c.hidden_act;
  j["rms_norm_eps"] = c.norm_eps;
  if (c.model_type == "llama" || c.model_type == "gemma") j["attention_bias"] = c.qkv_bias;
  if (c.model_type == "llama") j["mlp_bias"] = c.mlp_bias;
  if (c.model_type == "qwen2") j["use_sliding_window"] = c.sliding_window.has_value();
  if (c.sliding_window) j["sliding_window"] = *c.sliding_window;
  if (c.model_type == "mixtral") {
    j["num_local_experts"] = c.num_local_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
  }
  return j;
}

std::ostream& operator<<(std::ostream& os, const ModelConfig& c) {
  return os << "ModelConfig(" << c.model_type << ", layers=" << c.num_hidden_layers
            << ", hidden=" << c.hidden_size << ", heads=" << c.num_attention_heads << "/"
            << c.num_key_value_heads << "x" << c.head_dim << ", ffn=" << c.intermediate_size
            << ", vocab=" << c.vocab_size
            << (c.num_local_experts ? ", experts=" + std::to_string(c.num_local_experts) : "")
            << ", " << c.torch_dtype << ")";
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  // Strict: a key given twice ("num_hidden_layers": 32, ..., "num_hidden_layers": 80) is refused
  // instead of silently keeping the last; nesting is bounded while parsing (a config.json is a
  // flat object with a few nested ones: rope_scaling, quantization_config, text_config).
  constexpr int kMaxDepth = 16;
  const json j = parse_strict_json(read_text_file(path, "model config"), path.string(), kMaxDepth,
                                   "a Hugging Face config.json");
  return parse_model_config(j, path.string());
}

ModelConfig find_model_config(std::string_view name_or_path) {
  return load_model_config(find_config("models", name_or_path));
}

}  // namespace shardplan::tensor
