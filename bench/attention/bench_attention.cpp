// Softmax, entropy, KL and JS over rows of 4K and 32K floats, as bytes/s of input, beside an
// in-place roofline `x *= a` over the same number of bytes in the same binary.
//   ratio = (kernel bytes/s) / (roofline bytes/s), the roofline compiled for the same ISA level
//   the attention reductions dispatch to (detail::attention_simd_level()), so the comparison is
//   not flattered by a baseline-SSE2 roofline.
// Run: ropex_attention_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <vector>

#include <ropex/attention.hpp>

namespace {

// x *= a, written with the same 16-lane vector type as the reductions (GCC 12 at -O2 does not
// vectorise the plain loop), compiled three times and dispatched like them.
#if defined(__GNUC__)
__attribute__((always_inline)) inline void scale_body(float* x, std::int64_t n, float a) {
  using ropex::detail::vfloat16;
  const std::int64_t body = n - n % 16;
  for (std::int64_t i = 0; i < body; i += 16) {
    vfloat16 v;
    std::memcpy(&v, x + i, sizeof v);
    v *= a;
    std::memcpy(x + i, &v, sizeof v);
  }
  for (std::int64_t i = body; i < n; ++i) x[i] *= a;
}
#else
inline void scale_body(float* x, std::int64_t n, float a) {
  for (std::int64_t i = 0; i < n; ++i) x[i] *= a;
}
#endif
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"))) void scale_avx512(float* x, std::int64_t n, float a) {
  scale_body(x, n, a);
}
__attribute__((target("avx2,fma"))) void scale_avx2(float* x, std::int64_t n, float a) { scale_body(x, n, a); }
#endif
void scale(float* x, std::int64_t n, float a) {
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  switch (ropex::detail::attention_simd_level()) {
    case 2: return scale_avx512(x, n, a);
    case 1: return scale_avx2(x, n, a);
    default: break;
  }
#endif
  scale_body(x, n, a);
}

// CPU time of this thread, as Google Benchmark's default bytes_per_second uses (the machine is
// shared; wall time would charge other processes to the roofline).
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Roofline bytes/s for `floats` floats: median of 7 runs of ~20 ms CPU time each, measured once.
double roofline_bytes_per_second(std::int64_t floats) {
  static std::map<std::int64_t, double> cache;
  auto it = cache.find(floats);
  if (it != cache.end()) return it->second;
  std::vector<float> x(static_cast<std::size_t>(floats), 1.0f);
  std::vector<double> rates;
  for (int rep = 0; rep < 7; ++rep) {
    std::int64_t passes = 0;
    const double start = thread_cpu_seconds();
    double seconds = 0;
    do {
      for (int k = 0; k < 64; ++k) {
        scale(x.data(), floats, (passes + k) % 2 ? 2.0f : 0.5f);  // stays exactly 1 or 2: no overflow
        benchmark::ClobberMemory();
      }
      passes += 64;
      seconds = thread_cpu_seconds() - start;
    } while (seconds < 0.02);
    rates.push_back(static_cast<double>(passes) * static_cast<double>(floats) * sizeof(float) / seconds);
  }
  std::sort(rates.begin(), rates.end());
  return cache[floats] = rates[rates.size() / 2];
}

std::vector<float> distribution(std::int64_t n, std::uint32_t seed) {
  std::vector<float> p(static_cast<std::size_t>(n));
  std::uint32_t s = seed;
  double sum = 0;
  for (float& v : p) {
    s = s * 1664525u + 1013904223u;  // LCG: only needs to be deterministic, not good
    v = static_cast<float>((s >> 8) + 1);
    sum += v;
  }
  for (float& v : p) v = static_cast<float>(v / sum);
  return p;
}

void report(benchmark::State& state, std::int64_t bytes_per_iteration) {
  state.SetBytesProcessed(state.iterations() * bytes_per_iteration);
  const double roofline = roofline_bytes_per_second(bytes_per_iteration / static_cast<std::int64_t>(sizeof(float)));
  // value * iterations / seconds = (bytes/s) / roofline
  state.counters["ratio"] = benchmark::Counter(static_cast<double>(bytes_per_iteration) / roofline,
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.counters["roofline_GBps"] = roofline / 1e9;
}

void BM_roofline_scale(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  std::vector<float> x(static_cast<std::size_t>(n), 1.0f);
  int k = 0;
  for (auto _ : state) {
    scale(x.data(), n, (k++ % 2) ? 2.0f : 0.5f);
    benchmark::ClobberMemory();
  }
  report(state, n * static_cast<std::int64_t>(sizeof(float)));
}

void BM_softmax(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  std::vector<float> x = distribution(n, 1);
  for (auto _ : state) {
    ropex::softmax(x.data(), n);  // stays a valid row: softmax of probabilities
    benchmark::ClobberMemory();
  }
  report(state, n * static_cast<std::int64_t>(sizeof(float)));
}

void BM_entropy(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::vector<float> p = distribution(n, 1);
  for (auto _ : state) benchmark::DoNotOptimize(ropex::entropy(p.data(), n));
  report(state, n * static_cast<std::int64_t>(sizeof(float)));
}

void BM_kl_divergence(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::vector<float> p = distribution(n, 1), q = distribution(n, 2);
  for (auto _ : state) benchmark::DoNotOptimize(ropex::kl_divergence(p.data(), q.data(), n));
  report(state, 2 * n * static_cast<std::int64_t>(sizeof(float)));
}

void BM_js_divergence(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::vector<float> p = distribution(n, 1), q = distribution(n, 2);
  for (auto _ : state) benchmark::DoNotOptimize(ropex::js_divergence(p.data(), q.data(), n));
  report(state, 2 * n * static_cast<std::int64_t>(sizeof(float)));  // two rows read
}

}  // namespace

BENCHMARK(BM_roofline_scale)->Arg(4096)->Arg(8192)->Arg(32768)->Arg(65536);
BENCHMARK(BM_softmax)->Arg(4096)->Arg(32768);
BENCHMARK(BM_entropy)->Arg(4096)->Arg(32768);
BENCHMARK(BM_kl_divergence)->Arg(4096)->Arg(32768);
BENCHMARK(BM_js_divergence)->Arg(4096)->Arg(32768);
BENCHMARK_MAIN();
