// Writes the small GGUF files the ropex-inspect tests read (metadata and RoPE factor tensors only),
// with the test suite's GGUF writer: make_test_gguf DIR
//   DIR/llama3-rope-freqs.gguf  llama, 64 pairs, a rope_freqs.weight tensor (freq_factors)
//   DIR/gemma4-layers.gguf      gemma4, 12 layers (every 6th full), sliding layers with their own
//                               base and width, proportional RoPE as rope_freqs (1 and 1e30)
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gguf_writer.hpp"

namespace {
bool write(const std::string& path, const ropex_test::gguf_writer& w) {
  const auto bytes = w.bytes();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_test_gguf DIR\n");
    return 2;
  }
  const std::string dir = argv[1];

  // Llama 3.1 style: factors 1 for the fast pairs, 8 for the slow ones, a ramp between.
  std::vector<float> factors(64);
  for (std::size_t i = 0; i < factors.size(); ++i) factors[i] = i < 24 ? 1.0f : i >= 40 ? 8.0f : 1.0f + 7.0f * float(i - 24) / 16;
  ropex_test::gguf_writer llama;
  llama.str("general.architecture", "llama")
      .u32("llama.context_length", 131072)
      .u32("llama.embedding_length", 4096)
      .u32("llama.attention.head_count", 32)
      .u32("llama.rope.dimension_count", 128)
      .f32("llama.rope.freq_base", 500000.0f)
      .tensor_data("rope_freqs.weight", factors);

  std::vector<bool> sliding;
  for (int i = 0; i < 12; ++i) sliding.push_back((i + 1) % 6 != 0);
  std::vector<float> proportional(256, 1e30f);
  for (std::size_t i = 0; i < 64; ++i) proportional[i] = 1.0f;
  ropex_test::gguf_writer gemma;
  gemma.str("general.architecture", "gemma4")
      .u32("gemma4.context_length", 262144)
      .u32("gemma4.block_count", 12)
      .u32("gemma4.embedding_length", 5376)
      .u32("gemma4.attention.head_count", 32)
      .u32("gemma4.attention.key_length", 512)
      .u32("gemma4.attention.key_length_swa", 256)
      .bool_array("gemma4.attention.sliding_window_pattern", sliding)
      .u32("gemma4.rope.dimension_count", 512)
      .u32("gemma4.rope.dimension_count_swa", 256)
      .f32("gemma4.rope.freq_base", 1e6f)
      .f32("gemma4.rope.freq_base_swa", 1e4f)
      .tensor_data("rope_freqs.weight", proportional);

  if (!write(dir + "/llama3-rope-freqs.gguf", llama) || !write(dir + "/gemma4-layers.gguf", gemma)) {
    std::fprintf(stderr, "make_test_gguf: cannot write into %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
