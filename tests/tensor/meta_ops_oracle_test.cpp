// Replays PyTorch's answers for the meta op set (tests/data/meta_ops_oracle.json, written by
// scripts/gen_meta_oracle.py from torch 1.13) against shardplan::tensor: one test per case, named
// after the case id ("view/contig_2x3_to_6" -> MetaOpsOracle.Replay/view_contig_2x3_to_6).
//
// For each output the test checks whatever the case records: sizes, strides, storage offset,
// dtype, contiguity, storage bytes, and aliasing:
//   - aliases_input = k: the output shares input k's storage and is_view() matches torch;
//   - aliases_input = null: the output shares no input's storage. is_view() is not compared then,
//     because torch sometimes returns a view of an internal temporary (linear on 3-d input is
//     addmm(...).view(...)); that is autograd bookkeeping, not aliasing a planner can observe;
//   - same_object: the op returned the input handle itself (contiguous(), to(same dtype), add_).
// Error cases only require that shardplan throws shardplan::Error; on any mismatch both torch's
// and shardplan's messages are printed. A case using an argument the C++ API lacks is skipped
// with the reason printed (oracle::Unsupported), never passed.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/tensor/oracle/op_dispatch.h"

namespace shardplan::tensor {
namespace {

using oracle::Json;
// Shapes print as [2, 3] (base/error.h); the operator<< of this namespace hides it from
// clang's lookup.
using ::shardplan::operator<<;

struct OracleCase {
  std::string name;  // gtest-safe name derived from the id
  Json data;         // the case as recorded; {"load_error": ...} if the file could not be read
};

void PrintTo(const OracleCase& c, std::ostream* os) { *os << c.data.value("id", c.name); }

std::string SafeName(const std::string& id) {
  std::string s;
  for (char ch : id) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

const char* kOraclePath = SHARDPLAN_TEST_DATA_DIR "/meta_ops_oracle.json";

std::vector<OracleCase> LoadCases() {
  std::ifstream f(kOraclePath);
  Json doc;
  try {
    if (!f) throw std::runtime_error("cannot open file");
    doc = Json::parse(f);
  } catch (const std::exception& e) {
    return {{"LoadError", Json{{"load_error", std::string(kOraclePath) + ": " + e.what()}}}};
  }
  std::vector<OracleCase> cases;
  std::map<std::string, int> seen;
  for (const Json& c : doc.at("cases")) {
    std::string name = SafeName(c.at("id").get<std::string>());
    if (int n = seen[name]++; n > 0) name += "_" + std::to_string(n);  // keep names unique
    cases.push_back({name, c});
  }
  return cases;
}

const std::vector<OracleCase>& Cases() {
  static const std::vector<OracleCase> cases = LoadCases();
  return cases;
}

std::string Dims(std::span<const int64_t> d) {
  // Shapes print as [2, 3] (base/error.h); this namespace's own operator<< would hide it.
  using ::shardplan::operator<<;
  std::ostringstream os;
  ::shardplan::operator<<(os, d);
  return os.str();
}

std::string Describe(const std::vector<Tensor>& outs, const oracle::Inputs& inputs) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& o = outs[i];
    os << (i ? ", " : "") << describe(o) << " is_view=" << o.is_view()
       << " contiguous=" << o.is_contiguous() << " storage_nbytes=" << o.storage()->nbytes();
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].kind != oracle::Input::Kind::kTensor) continue;
      if (o.is_same(inputs[k].tensor)) os << " same_object_as_input=" << k;
      else if (o.shares_storage(inputs[k].tensor)) os << " aliases_input=" << k;
    }
  }
  os << "]";
  return os.str();
}

// Compares one output against torch's record; returns the mismatches ("" when it agrees).
std::string CompareOutput(const Json& exp, const Tensor& out, const oracle::Inputs& inputs,
                          size_t index) {
  std::ostringstream err;
  const std::string at = "outputs[" + std::to_string(index) + "].";
  auto check_dims = [&](const char* key, std::span<const int64_t> got) {
    if (!exp.contains(key)) return;
    const DimVector want = oracle::json_dims(exp[key]);
    if (!(want == DimVector(got))) {
      err << "  " << at << key << ": expected " << Dims(want) << ", got " << Dims(got) << "\n";
    }
  };
  auto check = [&](const char* key, const auto& got) {
    if (!exp.contains(key)) return;
    using T = std::decay_t<decltype(got)>;
    const T want = exp[key].get<T>();
    if (want != got) err << "  " << at << key << ": expected " << want << ", got " << got << "\n";
  };
  check_dims("sizes", out.sizes());
  check_dims("strides", out.strides());
  check("offset", out.storage_offset());
  check("dtype", std::string(dtype_name(out.dtype())));
  check("contiguous", out.is_contiguous());
  check("storage_nbytes", out.storage()->nbytes());

  if (exp.contains("aliases_input")) {
    int64_t aliased = -1;
    for (size_t k = 0; k < inputs.size() && aliased < 0; ++k) {
      if (inputs[k].kind == oracle::Input::Kind::kTensor && out.shares_storage(inputs[k].tensor)) {
        aliased = static_cast<int64_t>(k);
      }
    }
    const Json& want = exp["aliases_input"];
    if (want.is_null()) {
      if (aliased >= 0) {
        err << "  " << at << "aliases_input: expected a fresh storage, got a view of input "
            << aliased << "\n";
      }
    } else {
      const int64_t k = want.get<int64_t>();
      if (aliased != k) {
        err << "  " << at << "aliases_input: expected " << k << ", got "
            << (aliased < 0 ? std::string("none (fresh storage)") : std::to_string(aliased))
            << "\n";
      } else {
        check("is_view", out.is_view());
      }
      const bool same = out.is_same(inputs[k].tensor);
      if (exp.contains("same_object") && exp["same_object"].get<bool>() != same) {
        err << "  " << at << "same_object (returns input " << k << " itself): expected "
            << exp["same_object"].get<bool>() << ", got " << same << "\n";
      }
    }
  }
  if (exp.contains("same_object") && !exp["same_object"].get<bool>()) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].kind == oracle::Input::Kind::kTensor && out.is_same(inputs[k].tensor)) {
        err << "  " << at << "same_object: expected a new handle, got input " << k << " itself\n";
      }
    }
  }
  return err.str();
}

class MetaOpsOracle : public testing::TestWithParam<OracleCase> {};

TEST_P(MetaOpsOracle, Replay) {
  const Json& c = GetParam().data;
  ASSERT_FALSE(c.contains("load_error")) << c["load_error"].get<std::string>();
  const std::string op = c.at("op").get<std::string>();
  const Json& expect = c.at("expect");
  const bool torch_ok = expect.at("ok").get<bool>();

  std::ostringstream context;
  context << "case " << c["id"].get<std::string>() << "\n  inputs: " << c["inputs"].dump()
          << "\n  args: " << c["args"].dump() << "\n  torch: " << expect.dump() << "\n";
  for (const char* k : {"note", "derived"}) {
    if (c.contains(k)) context << "  " << k << ": " << c[k].get<std::string>() << "\n";
  }

  const auto& table = oracle::op_table();
  const auto fn = table.find(op);
  ASSERT_NE(fn, table.end()) << context.str() << "no dispatcher entry for op '" << op << "'";

  oracle::Inputs inputs;
  try {
    for (const Json& spec : c.at("inputs")) inputs.push_back(oracle::build_input(spec));
  } catch (const std::exception& e) {
    FAIL() << context.str() << "  could not build the inputs in shardplan: " << e.what();
  }

  std::vector<Tensor> outs;
  std::string sp_error;
  oracle::Args args(c.at("args"));
  try {
    outs = fn->second(inputs, args);
  } catch (const oracle::Unsupported& e) {
    GTEST_SKIP() << "unsupported by the C++ API: " << e.what() << " (case "
                 << c["id"].get<std::string>() << ")";
  } catch (const shardplan::Error& e) {
    sp_error = e.what();
    if (sp_error.empty()) sp_error = "(empty message)";
  } catch (const std::exception& e) {
    FAIL() << context.str() << "  shardplan threw a non-shardplan::Error exception: " << e.what();
  }

  if (!torch_ok) {
    EXPECT_FALSE(sp_error.empty()) << context.str() << "  torch error: "
                                   << expect["error"].get<std::string>()
                                   << "\n  shardplan: no error, outputs " << Describe(outs, inputs);
    return;
  }
  ASSERT_TRUE(sp_error.empty()) << context.str() << "  shardplan threw: " << sp_error;

  const Json& want = expect.at("outputs");
  ASSERT_EQ(outs.size(), want.size()) << context.str() << "  output count differs; shardplan: "
                                      << Describe(outs, inputs);
  std::string mismatches;
  for (size_t i = 0; i < outs.size(); ++i) {
    mismatches += CompareOutput(want[i], outs[i], inputs, i);
  }
  EXPECT_TRUE(mismatches.empty()) << context.str() << "  shardplan: " << Describe(outs, inputs)
                                  << "\n" << mismatches;
}

INSTANTIATE_TEST_SUITE_P(PyTorch, MetaOpsOracle, testing::ValuesIn(Cases()),
                         [](const testing::TestParamInfo<OracleCase>& info) {
                           return info.param.name;
                         });

// The corpus itself: it loaded, is as large as promised, and every op has a dispatcher entry and
// at least one successful case.
TEST(MetaOpsOracleData, CorpusIsCompleteAndDispatchable) {
  const auto& cases = Cases();
  ASSERT_FALSE(cases.empty());
  ASSERT_FALSE(cases[0].data.contains("load_error")) << cases[0].data["load_error"];
  EXPECT_GE(cases.size(), 450u);
  std::map<std::string, int> ok_cases;
  for (const auto& c : cases) {
    const std::string op = c.data["op"].get<std::string>();
    EXPECT_TRUE(oracle::op_table().contains(op)) << "no dispatcher entry for op " << op;
    ok_cases[op] += c.data["expect"]["ok"].get<bool>() ? 1 : 0;
  }
  const std::set<std::string> error_only = {"nonzero", "item", "index_mask", "cpu"};
  for (const auto& [op, n] : ok_cases) {
    if (!error_only.contains(op)) {
      EXPECT_GT(n, 0) << "op " << op << " has no successful case";
    }
  }
}

}  // namespace
}  // namespace shardplan::tensor
