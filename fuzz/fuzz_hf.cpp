// libFuzzer target: Hugging Face config.json import. Any input must either produce a
// model_rope that ropex accepts or raise std::invalid_argument; anything else (another
// exception, a crash, a sanitizer report, a leak) is a bug. Run through fuzz/run.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "ropex/import/hf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* layer_type : {"full_attention", "sliding_attention"}) {
    ropex::import_options options;
    options.layer_type = layer_type;
    try {
      const ropex::model_rope m = ropex::parse_hf_config(text, options);
      // The result must be usable end to end, for short and long sequences.
      (void)ropex::make_frequencies(m.config, m.policy, 0);
      (void)ropex::make_frequencies(m.config, m.policy, std::int64_t{1} << 40);
    } catch (const std::invalid_argument&) {
      // The documented failure mode.
    }
  }
  return 0;
}
