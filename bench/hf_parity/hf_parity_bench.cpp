// apply_hf_rotate_half (HF's cos/sin rows in T) against rotary_embedding::apply with a stored
// cos_sin_table (float rows): the same tensor read and written once, plus one cos and one sin row
// per token, so the two do the same memory traffic. Paired: every iteration times both on the same
// buffer, in alternating order, and `ratio` is the median of the per-iteration exact time / parity
// time (1.0 = parity as fast as exact; >= 0.9 = within 10%). `roofline_ratio` is the parity call
// against the in-place roofline pass (bench/roofline.hpp) timed in the same iteration.
//   hf/<shape>/<type>/<layout>   shapes a 4096x32x128, e 4096x8x64, d 1x32x128 (decode); layout
//                                half (apply_hf_rotate_half) or interleave (the DeepSeek variant,
//                                against the exact interleaved rotation)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
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
void bench(benchmark::State& state, shape s, bool interleave) {
  const std::size_t n = static_cast<std::size_t>(s.tokens * s.heads * s.head_dim);
  ropex_bench::aligned_buffer<T> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = T(std::sin(0.001f * static_cast<float>(i % 100000)));
  std::vector<std::int64_t> positions(static_cast<std::size_t>(s.tokens));
  for (std::int64_t t = 0; t < s.tokens; ++t) positions[static_cast<std::size_t>(t)] = s.tokens == 1 ? 4095 : t;
  const ropex::rope_config cfg{s.head_dim, 0, 10000.0, interleave ? ropex::layout::interleaved : ropex::layout::half};
  const ropex::rotary_embedding rope(cfg, ropex::plain{});
  const ropex::cos_sin_table table = rope.make_table(s.tokens == 1 ? 4096 : s.tokens);
  std::vector<T> cos(static_cast<std::size_t>(s.tokens * s.head_dim)), sin(cos.size());
  ropex::make_hf_cos_sin<T>(cfg, ropex::plain{}, positions.data(), s.tokens, 0, cos.data(), sin.data());
  const auto view = ropex::contiguous_view(x.data(), s.tokens, s.heads, s.head_dim);
  const std::size_t bytes = n * sizeof(T);
  const float one = ropex_bench::runtime_one();
  // Small shapes time a batch of calls on the same in-cache tensor. HF's rows in T are not exactly
  // unit (cos^2 + sin^2 != 1 after rounding), so repeated parity calls drift the values towards
  // subnormals and infinities; each batch starts from the initial values (untimed, both kernels).
  const int calls = ropex_bench::calls_per_timing(bytes);
  const std::vector<T> initial(x.data(), x.data() + n);
  const auto refresh = [&] {
    std::copy(initial.begin(), initial.end(), x.data());
  };
  using clock = std::chrono::steady_clock;
  const auto timed = [&](auto&& f) {
    refresh();
    const clock::time_point t0 = clock::now();
    for (int k = 0; k < calls; ++k) {
      f();
      benchmark::ClobberMemory();
    }
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  const auto parity = [&] {
    if (interleave)
      ropex::apply_hf_rotate_half_interleave(view, cos.data(), sin.data(), s.head_dim);
    else
      ropex::apply_hf_rotate_half(view, cos.data(), sin.data(), s.head_dim);
  };
  const auto exact = [&] { rope.apply(view, positions.data(), table); };
  const auto roofline = [&] { ropex_bench::scale(reinterpret_cast<float*>(x.data()), bytes / sizeof(float), one, 1); };
  std::vector<double> ratios, roofline_ratios;
  ratios.reserve(static_cast<std::size_t>(state.max_iterations));
  roofline_ratios.reserve(static_cast<std::size_t>(state.max_iterations));
  bool parity_first = true;
  for (auto _ : state) {
    double parity_seconds = 0, exact_seconds = 0;
    if (parity_first) {
      parity_seconds = timed(parity);
      exact_seconds = timed(exact);
    } else {
      exact_seconds = timed(exact);
      parity_seconds = timed(parity);
    }
    parity_first = !parity_first;
    const double roofline_seconds = timed(roofline);
    state.SetIterationTime(parity_seconds);
    ratios.push_back(exact_seconds / parity_seconds);
    roofline_ratios.push_back(roofline_seconds / parity_seconds);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(2.0 * static_cast<double>(bytes) * calls) *
                          static_cast<std::int64_t>(state.iterations()));
  state.counters["ratio"] = ropex_bench::median(ratios);
  state.counters["roofline_ratio"] = ropex_bench::median(roofline_ratios);
  state.counters["calls_per_iteration"] = calls;
  state.SetLabel(ropex::kernel_isa());
}

template <class T>
void register_type(const char* type) {
  for (const shape& s : shapes)
    for (bool interleave : {false, true})
      benchmark::RegisterBenchmark(
          (std::string("hf/") + s.name + "/" + type + (interleave ? "/interleave" : "/half")).c_str(),
          [s, interleave](benchmark::State& st) { bench<T>(st, s, interleave); })
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
