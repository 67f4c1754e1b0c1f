// Typed, strict access to one Hugging Face config.json document, for the families' parse functions
// (tensor/models/family.h); internal to tensor/models/. Every error names the source and the field
// (Note [Strict config parsing] in model_config.h).
//   ConfigFields f(j, "llama3-8b.json");
//   c.hidden_size = f.integer("hidden_size");                 // required
//   c.rope_theta = f.number("rope_theta", 10000.0);           // HF's default when absent or null
//   if (f.has("rope_scaling")) c.rope_scaling = parse_rope_scaling(f);
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "tensor/models/model_config.h"

namespace shardplan::tensor {

class ConfigFields {
 public:
  ConfigFields(const nlohmann::json& j, std::string_view source) : j_(j), source_(source) {}

  // "<source>: field '<field>': <what>" as a bad-input error.
  [[noreturn]] void fail(std::string_view field, const std::string& what) const;
  // Present and not null.
  // Every accessor records the key as read: a key the family asked about is one it understands
  // (Note [Architecture fields nobody read] in model_config.cpp).
  bool has(const char* f) const {
    read_.insert(f);
    return j_.contains(f) && !j_.at(f).is_null();
  }
  bool was_read(const std::string& f) const { return read_.count(f) > 0; }
  // Present with the value null (transformers' None, which may differ from the key's absence).
  bool is_null(const char* f) const {
    read_.insert(f);
    return j_.contains(f) && j_.at(f).is_null();
  }

  // An integer (4096.0 is accepted, as some exporters write floats; 4096.5 and "4096" are not);
  // the first form is required.
  int64_t integer(const char* f) const;
  int64_t integer(const char* f, int64_t dflt) const { return has(f) ? integer(f) : dflt; }
  std::optional<int64_t> opt_integer(const char* f) const {
    return has(f) ? std::optional<int64_t>(integer(f)) : std::nullopt;
  }
  double number(const char* f, double dflt) const;
  bool boolean(const char* f, bool dflt) const;
  std::string string(const char* f, std::string dflt) const;
  const nlohmann::json& raw(const char* f) const {
    read_.insert(f);
    return j_.at(f);
  }
  std::string_view source() const { return source_; }

 private:
  int64_t as_int(std::string_view f, const nlohmann::json& v) const;

  const nlohmann::json& j_;
  std::string_view source_;
  mutable std::set<std::string> read_;
};

// The document's `rope_scaling` object (call when f.has("rope_scaling")), checked as
// transformers' modeling_rope_utils does.
RopeScaling parse_rope_scaling(const ConfigFields& f);
// The same checks of the scaling object `r`, errors naming the document's field `key`.
RopeScaling parse_rope_scaling(const nlohmann::json& r, const ConfigFields& top, const char* key);
// transformers 5's "rope_parameters" (call when f.has("rope_parameters")): rope_theta, the
// scaling and partial_rotary_factor of `c`, over what the legacy keys said (Note
// [rope_parameters] in config_fields.cpp).
void parse_rope_parameters(const ConfigFields& f, ModelConfig& c);
// head_dim = hidden_size / num_attention_heads for the families whose attention splits the hidden
// size into its heads (GPT-2's descendants, OPT, MPT, DBRX): refuses heads that do not divide it,
// naming the file's keys `heads_key` and `hidden_key` ("n_head", "n_embd"), with `why` appended
// when given. Heads of 0 or below leave head_dim 0 for validate() to refuse by name.
void head_dim_from_hidden(const ConfigFields& f, ModelConfig& c, const char* heads_key,
                          const char* hidden_key, const std::string& why = {});
// What parse_rope_scaling reads back (null when unset).
nlohmann::json rope_scaling_json(const std::optional<RopeScaling>& s);

}  // namespace shardplan::tensor
