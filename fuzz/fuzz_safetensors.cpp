// libFuzzer target: safetensors reader. Any input must either parse (and then every float tensor
// converts within the buffer) or raise std::invalid_argument; anything else (another exception, a
// crash, a sanitizer report, a leak) is a bug. Run through fuzz/run.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "ropex/model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = ropex::safetensors_file::from_bytes(std::vector<std::uint8_t>(data, data + size), "fuzz");
    for (const ropex::tensor_info& t : file.tensors()) {
      if (t.dtype != ropex::tensor_dtype::f32 && t.dtype != ropex::tensor_dtype::f16 &&
          t.dtype != ropex::tensor_dtype::bf16 && t.dtype != ropex::tensor_dtype::f64)
        continue;
      if (t.elements > (1 << 20)) continue;  // bounded by the input anyway; keeps each run fast
      (void)ropex::tensor_to_float(t);
    }
  } catch (const std::invalid_argument&) {
    // The documented failure mode.
  }
  return 0;
}
