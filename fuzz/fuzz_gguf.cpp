// libFuzzer target: GGUF metadata import. Any input must either parse or raise
// std::invalid_argument (ropex::gguf::format_error derives from it); anything else -- another
// exception, a crash, an out-of-bounds read, a leak -- is a bug. Run through fuzz/run.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "ropex/import/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exact-size heap copy so AddressSanitizer sees any read past the end.
  const std::vector<std::uint8_t> bytes(data, data + size);
  try {
    const ropex::model_rope m = ropex::parse_gguf(bytes.data(), bytes.size());
    (void)ropex::make_frequencies(m.config, m.policy, 0);
  } catch (const std::invalid_argument&) {
  }
  try {
    // The same bytes with tiny array heads kept and tensor infos skipped: exercises the
    // skip paths of the parser.
    ropex::gguf::read_options options;
    options.max_array_elements_kept = 1;
    options.read_tensor_names = false;
    (void)ropex::gguf::read_metadata(bytes.data(), bytes.size(), options);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
