// apply_hf_rotate_half (precomputed HF cos/sin rows in T) against rotary_embedding::apply (exact
// angles formed per token), on the same tensor, each paired with the in-place roofline over the
// tensor's bytes (bench/roofline.hpp). Compare the two `ratio` counters: the parity kernel streams
// the same tensor plus one cos and one sin row per token.
//   hf/<shape>/<type>/parity|exact     shapes a 4096x32x128, e 4096x8x64, d 1x32x128 (decode)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <ropex/hf_parity.hpp>
#include <ropex/ropex.hpp>

#include "roofline.hpp"

namespace {

struct shape {
  const char* name;
  std::int64_t tokens, heads;
  int head_dim;
};
const shape shapes[] = {{"a", 4096, 32, 128}, {"e", 4096, 8, 64}, {"d", 1, 32, 128}};

template <class T>
void bench(benchmark::State& state, shape s, bool parity) {
  const std::size_t n = static_cast<std::size_t>(s.tokens * s.heads * s.head_dim);
  ropex_bench::aligned_buffer<T> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = T(std::sin(0.001f * static_cast<float>(i % 100000)));
  std::vector<std::int64_t> positions(static_cast<std::size_t>(s.tokens));
  for (std::int64_t t = 0; t < s.tokens; ++t) positions[static_cast<std::size_t>(t)] = s.tokens == 1 ? 4095 : t;
  const ropex::rope_config cfg{s.head_dim};
  const ropex::rotary_embedding rope(cfg, ropex::plain{});
  std::vector<T> cos(static_cast<std::size_t>(s.tokens * s.head_dim)), sin(cos.size());
  ropex::make_hf_cos_sin<T>(cfg, ropex::plain{}, positions.data(), s.tokens, 0, cos.data(), sin.data());
  const auto view = ropex::contiguous_view(x.data(), s.tokens, s.heads, s.head_dim);
  const std::size_t bytes = n * sizeof(T);
  const float a = ropex_bench::runtime_one();
  float* roofline_data = reinterpret_cast<float*>(x.data());
  // Batched shapes (decode) rotate the same in-cache tensor millions of times. HF's rows in T
  // are not exactly unit (cos^2 + sin^2 != 1 after rounding), so the parity values drift into
  // subnormals and infinities; restoring them before each batch (untimed, both modes) keeps the
  // data what one call sees.
  const int calls = ropex_bench::calls_per_timing(bytes);
  const std::vector<T> initial(x.data(), x.data() + n);
  ropex_bench::run_paired(
      state, 2.0 * static_cast<double>(bytes), 2.0 * static_cast<double>(bytes), calls,
      [&] {
        if (parity)
          ropex::apply_hf_rotate_half(view, cos.data(), sin.data(), s.head_dim);
        else
          rope.apply(view, positions.data());
      },
      [&] { ropex_bench::scale(roofline_data, bytes / sizeof(float), a, 1); },
      [&] {
        if (calls > 1) std::copy(initial.begin(), initial.end(), x.data());
      });
  state.SetLabel(ropex::kernel_isa());
}

template <class T>
void register_type(const char* type) {
  for (const shape& s : shapes)
    for (bool parity : {true, false})
      benchmark::RegisterBenchmark(
          (std::string("hf/") + s.name + "/" + type + (parity ? "/parity" : "/exact")).c_str(),
          [s, parity](benchmark::State& st) { bench<T>(st, s, parity); })
          ->UseManualTime();
}

const bool registered = [] {
  register_type<float>("f32");
  register_type<ropex::bfloat16>("bf16");
  register_type<ropex::float16>("f16");
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
