// The table of model families (Note [Adding a model family] in family.h). An explicit list rather
// than self-registering objects: a static library drops object files nothing references, so a
// family registering itself from its own file could silently vanish from a binary.
#include <algorithm>

#include "base/error.h"
#include "tensor/models/family.h"

namespace shardplan::tensor {

// Defined in tensor/models/family_<model_type>.cpp.
extern const ModelFamily kAfmoeFamily;
extern const ModelFamily kAXK1Family;
extern const ModelFamily kAxk2Family;
extern const ModelFamily kApertusFamily;
extern const ModelFamily kArceeFamily;
extern const ModelFamily kCohereFamily;
extern const ModelFamily kCwmFamily;
extern const ModelFamily kCohere2Family;
extern const ModelFamily kCohere2MoeFamily;
extern const ModelFamily kCohereCompassTextFamily;
extern const ModelFamily kDeepseekV2Family;
extern const ModelFamily kDeepseekV3Family;
extern const ModelFamily kDeepseekV32Family;
extern const ModelFamily kDeepseekV4Family;
extern const ModelFamily kDots1Family;
extern const ModelFamily kErnie45Family;
extern const ModelFamily kErnie45MoeFamily;
extern const ModelFamily kExaone4Family;
extern const ModelFamily kExaoneMoeFamily;
extern const ModelFamily kFalconH1Family;
extern const ModelFamily kFlexOlmoFamily;
extern const ModelFamily kGemmaFamily;
extern const ModelFamily kGemma2Family;
extern const ModelFamily kGemma3TextFamily;
extern const ModelFamily kGemma4TextFamily;
extern const ModelFamily kGlmFamily;
extern const ModelFamily kGlm4Family;
extern const ModelFamily kGlm4MoeFamily;
extern const ModelFamily kGlm4MoeLiteFamily;
extern const ModelFamily kGlmMoeDsaFamily;
extern const ModelFamily kGpt2Family;
extern const ModelFamily kGptOssFamily;
extern const ModelFamily kGptNeoxFamily;
extern const ModelFamily kGraniteFamily;
extern const ModelFamily kGraniteMoeFamily;
extern const ModelFamily kGraniteMoeSharedFamily;
extern const ModelFamily kGraniteMoeHybridFamily;
extern const ModelFamily kGraniteSwaFamily;
extern const ModelFamily kGraniteMoeSwaFamily;
extern const ModelFamily kNemotronFamily;
extern const ModelFamily kNemotronHFamily;
extern const ModelFamily kBambaFamily;
extern const ModelFamily kHeliumFamily;
extern const ModelFamily kHunYuanDenseV1Family;
extern const ModelFamily kHyperClovaxFamily;
extern const ModelFamily kHunYuanMoeV1Family;
extern const ModelFamily kHyV3Family;
extern const ModelFamily kJais2Family;
extern const ModelFamily kKimiK2Family;
extern const ModelFamily kLfm2Family;
extern const ModelFamily kLfm2MoeFamily;
extern const ModelFamily kLlamaFamily;
extern const ModelFamily kLlama4TextFamily;
extern const ModelFamily kMimoV2FlashFamily;
extern const ModelFamily kMinimaxM2Family;
extern const ModelFamily kMinistralFamily;
extern const ModelFamily kMinistral3Family;
extern const ModelFamily kMistral4Family;
extern const ModelFamily kMistralFamily;
extern const ModelFamily kMiniCPM3Family;
extern const ModelFamily kMixtralFamily;
extern const ModelFamily kNanoChatFamily;
extern const ModelFamily kOlmoFamily;
extern const ModelFamily kOlmo2Family;
extern const ModelFamily kOlmo3Family;
extern const ModelFamily kOlmoeFamily;
extern const ModelFamily kPhiFamily;
extern const ModelFamily kPhi3Family;
extern const ModelFamily kPhimoeFamily;
extern const ModelFamily kQwen2Family;
extern const ModelFamily kQwen2MoeFamily;
extern const ModelFamily kQwen3Family;
extern const ModelFamily kQwen3MoeFamily;
extern const ModelFamily kQwen3NextFamily;
extern const ModelFamily kQwen2VlTextFamily;
extern const ModelFamily kQwen25VlTextFamily;
extern const ModelFamily kQwen3VlTextFamily;
extern const ModelFamily kQwen3VlMoeTextFamily;
extern const ModelFamily kQwen35TextFamily;
extern const ModelFamily kQwen35MoeTextFamily;
extern const ModelFamily kSeedOssFamily;
extern const ModelFamily kSolarOpenFamily;
extern const ModelFamily kStablelmFamily;
extern const ModelFamily kStarcoder2Family;
extern const ModelFamily kSmolLM3Family;
extern const ModelFamily kVaultGemmaFamily;
extern const ModelFamily kYoutuFamily;
extern const ModelFamily kGptBigCodeFamily;
extern const ModelFamily kGptjFamily;
extern const ModelFamily kMptFamily;
extern const ModelFamily kBloomFamily;
extern const ModelFamily kFalconFamily;
extern const ModelFamily kOptFamily;
extern const ModelFamily kDbrxFamily;
extern const ModelFamily kOlmoHybridFamily;
extern const ModelFamily kLagunaFamily;
extern const ModelFamily kLongcatFlashFamily;
extern const ModelFamily kMamba2Family;
extern const ModelFamily kMellumFamily;
extern const ModelFamily kStep3p5Family;
extern const ModelFamily kMuseGlimmerTextFamily;
extern const ModelFamily kZayaFamily;
extern const ModelFamily kMinimaxM3VlTextFamily;
extern const ModelFamily kJambaFamily;
extern const ModelFamily kMiniMaxFamily;
extern const ModelFamily kInklingTextFamily;
extern const ModelFamily kMambaFamily;
extern const ModelFamily kFalconMambaFamily;
extern const ModelFamily kZamba2Family;
extern const ModelFamily kGptNeoFamily;
extern const ModelFamily kXglmFamily;
extern const ModelFamily kBitnetFamily;
extern const ModelFamily kCodegenFamily;
extern const ModelFamily kZambaFamily;
extern const ModelFamily kJetMoeFamily;
extern const ModelFamily kGemma3nTextFamily;
extern const ModelFamily kRecurrentGemmaFamily;
extern const ModelFamily kBioGptFamily;
extern const ModelFamily kPersimmonFamily;
extern const ModelFamily kDiffLlamaFamily;
extern const ModelFamily kAriaTextFamily;
extern const ModelFamily kGemma4UnifiedTextFamily;
extern const ModelFamily kRwkvFamily;
extern const ModelFamily kXlstmFamily;
extern const ModelFamily kHrmTextFamily;

namespace {

const ModelFamily* const kRegistered[] = {
    &kDeepseekV2Family,
    &kDeepseekV3Family,
    &kDeepseekV32Family,
    &kDeepseekV4Family,
    &kGlm4MoeLiteFamily,
    &kGlmMoeDsaFamily,
    &kErnie45Family,
    &kErnie45MoeFamily,
    &kGemmaFamily,
    &kGemma2Family,
    &kVaultGemmaFamily,
    &kGemma3TextFamily,
    &kGemma4TextFamily,
    &kGlm4MoeFamily,
    &kGpt2Family,
    &kGptOssFamily,
    &kGptNeoxFamily,
    &kKimiK2Family,
    &kLfm2Family,
    &kLfm2MoeFamily,
    &kLlamaFamily,
    &kLlama4TextFamily,
    &kMistralFamily,
    &kMinimaxM2Family,
    &kMimoV2FlashFamily,
    &kMixtralFamily,
    &kOlmo2Family,
    &kOlmo3Family,
    &kPhiFamily,
    &kPhi3Family,
    &kPhimoeFamily,
    &kQwen2Family,
    &kQwen2MoeFamily,
    &kQwen3Family,
    &kQwen3MoeFamily,
    &kQwen3NextFamily,
    &kQwen35TextFamily,
    &kQwen2VlTextFamily,
    &kQwen25VlTextFamily,
    &kQwen3VlTextFamily,
    &kQwen3VlMoeTextFamily,
    &kQwen35MoeTextFamily,
    &kGlmFamily,
    &kGlm4Family,
    &kMinistralFamily,
    &kMinistral3Family,
    &kMistral4Family,
    &kSeedOssFamily,
    &kSolarOpenFamily,
    &kStarcoder2Family,
    &kSmolLM3Family,
    &kExaone4Family,
    &kExaoneMoeFamily,
    &kFalconH1Family,
    &kGraniteFamily,
    &kGraniteMoeFamily,
    &kGraniteMoeSharedFamily,
    &kGraniteMoeHybridFamily,
    &kGraniteSwaFamily,
    &kGraniteMoeSwaFamily,
    &kCohereFamily,
    &kCohere2Family,
    &kCohere2MoeFamily,
    &kDots1Family,
    &kOlmoeFamily,
    &kFlexOlmoFamily,
    &kArceeFamily,
    &kApertusFamily,
    &kAfmoeFamily,
    &kHeliumFamily,
    &kHunYuanDenseV1Family,
    &kHunYuanMoeV1Family,
    &kHyV3Family,
    &kNemotronFamily,
    &kNemotronHFamily,
    &kBambaFamily,
    &kCwmFamily,
    &kJais2Family,
    &kOlmoFamily,
    &kStablelmFamily,
    &kHyperClovaxFamily,
    &kNanoChatFamily,
    &kYoutuFamily,
    &kMiniCPM3Family,
    &kAXK1Family,
    &kAxk2Family,
    &kCohereCompassTextFamily,
    &kGptBigCodeFamily,
    &kGptjFamily,
    &kMptFamily,
    &kBloomFamily,
    &kFalconFamily,
    &kOptFamily,
    &kDbrxFamily,
    &kOlmoHybridFamily,
    &kLagunaFamily,
    &kLongcatFlashFamily,
    &kMamba2Family,
    &kMellumFamily,
    &kStep3p5Family,
    &kMuseGlimmerTextFamily,
    &kZayaFamily,
    &kMinimaxM3VlTextFamily,
    &kJambaFamily,
    &kMiniMaxFamily,
    &kInklingTextFamily,
    &kMambaFamily,
    &kFalconMambaFamily,
    &kZamba2Family,
    &kGptNeoFamily,
    &kXglmFamily,
    &kBitnetFamily,
    &kCodegenFamily,
    &kZambaFamily,
    &kJetMoeFamily,
    &kGemma3nTextFamily,
    &kRecurrentGemmaFamily,
    &kBioGptFamily,
    &kPersimmonFamily,
    &kDiffLlamaFamily,
    &kAriaTextFamily,
    &kGemma4UnifiedTextFamily,
    &kRwkvFamily,
    &kXlstmFamily,
    &kHrmTextFamily,
};

}  // namespace

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> sorted = [] {
    std::vector<const ModelFamily*> v(std::begin(kRegistered), std::end(kRegistered));
    std::sort(v.begin(), v.end(), [](const ModelFamily* a, const ModelFamily* b) {
      return a->model_type < b->model_type;
    });
    for (size_t i = 1; i < v.size(); ++i) {
      SP_ASSERT(v[i - 1]->model_type != v[i]->model_type, "model family '", v[i]->model_type,
                "' registered twice");
    }
    return v;
  }();
  return sorted;
}

const ModelFamily* find_family(std::string_view model_type) {
  for (const ModelFamily* f : model_families()) {
    if (f->model_type == model_type) return f;
  }
  return nullptr;
}

bool embeds_with_padding_idx(const ModelFamily& family) {
  for (const InitRule& r : family.init_rules) {
    if (r.fill == InitFill::kNormalPaddingRowZero) return true;
  }
  return false;
}

const ModelFamily& family_of(const ModelConfig& c) {
  const ModelFamily* f = find_family(c.model_type);
  SP_CHECK(f != nullptr, "model_type '", c.model_type,
           "' is not supported; expected one of: ", model_types_list());
  return *f;
}

std::string model_types_list() {
  std::string s;
  for (const ModelFamily* f : model_families()) {
    if (!s.empty()) s += ", ";
    s += f->model_type;
  }
  return s;
}

std::string_view ModelFamily::file_key(std::string_view field) const {
  for (const FieldRename& r : renamed) {
    if (r.field == field) return r.key;
  }
  return field;
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const ModelFamily* f : model_families()) out.emplace_back(f->model_type);
  return out;
}

}  // namespace shardplan::tensor
