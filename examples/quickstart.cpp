#include <ropex/ropex.hpp>

#include <cstdio>
#include <vector>

int main() {
  // Qwen2.5-7B-Instruct with its YaRN block: head_dim 128, base 1e6, factor 4 over 32K.
  const ropex::rope_config config{128, 0, 1e6, ropex::layout::half};
  const ropex::rotary_embedding rope(config, ropex::yarn{4.0, 32768});

  // q has 28 heads, k has 4 (GQA); [tokens][heads][head_dim], rotated in place.
  const std::int64_t tokens = 3, q_heads = 28, kv_heads = 4;
  std::vector<float> q(tokens * q_heads * 128, 0.5f), k(tokens * kv_heads * 128, 0.5f);
  const std::vector<std::int64_t> positions{0, 1, 100000};
  rope.apply(q.data(), tokens, q_heads, positions.data());
  rope.apply(k.data(), tokens, kv_heads, positions.data());

  std::printf("attention factor %.10f, kernel %s, q[last] = %f\n", rope.freqs().attention_factor,
              ropex::kernel_isa(), q.back());
}
