// Softmax, entropy, KL and JS over rows of 4K and 32K floats, as bytes/s of input (softmax: its
// row, read and written in place; entropy: its row; KL and JS: both rows), beside the in-place
// roofline `x *= a` of bench/bench_rope.cpp over the same number of bytes, in the same binary:
//   ratio = (kernel bytes/s) / (roofline bytes/s over as many bytes)
// i.e. how long the kernel takes against one streaming in-place pass over its input.
// What to expect (AVX-512, two 512-bit ports): the roofline moves 64 bytes per cycle or so while a
// 4K row sits in L1, and about 2.5 cycles per 64 bytes from L2 (32K rows). A logarithm costs 13
// vector operations (detail/table_log.hpp), so entropy needs ~18 operations = ~9 cycles per 16
// floats, JS ~26 per 16 pairs of floats, KL ~17, softmax ~25: compute-bound well below the L1
// roofline (ratios ~0.1 at 4K) and within 2-4x of the L2 one (~0.3-0.4 at 32K).
// Run: ropex_attention_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <new>
#include <map>
#include <vector>

#include <ropex/attention.hpp>

#include "../roofline.hpp"

namespace {

// The shared roofline (bench/roofline.hpp) on 64-byte aligned rows: a std::vector from malloc sits
// 16 bytes off a cache line and splits every 64-byte access.
using aligned_row = ropex_bench::aligned_buffer<float>;
inline void scale(float* x, std::int64_t n, float a) { ropex_bench::scale(x, static_cast<std::size_t>(n), a); }

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
  aligned_row x(floats);
  std::fill(x.data(), x.data() + floats, 1.0f);
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

aligned_row distribution(std::int64_t n, std::uint32_t seed) {
  aligned_row p(n);
  std::uint32_t s = seed;
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;  // LCG: only needs to be deterministic, not good
    p.data()[i] = static_cast<float>((s >> 8) + 1);
    sum += p.data()[i];
  }
  for (std::int64_t i = 0; i < n; ++i) p.data()[i] = static_cast<float>(p.data()[i] / sum);
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
  aligned_row x(n);
  std::fill(x.data(), x.data() + n, 1.0f);
  int k = 0;
  for (auto _ : state) {
    scale(x.data(), n, (k++ % 2) ? 2.0f : 0.5f);
    benchmark::ClobberMemory();
  }
  report(state, n * static_cast<std::int64_t>(sizeof(float)));
}

void BM_softmax(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  aligned_row x = distribution(n, 1);
  for (auto _ : state) {
    ropex::softmax(x.data(), n);  // stays a valid row: softmax of probabilities
    benchmark::ClobberMemory();
  }
  report(state, n * static_cast<std::int64_t>(sizeof(float)));
}

void BM_entropy(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const aligned_row p = distribution(n, 1);
  for (auto _ : state) benchmark::DoNotOptimize(ropex::entropy(p.data(), n));
  report(state, n * static_cast<std::int64_t>(sizeof(float)));
}

void BM_kl_divergence(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const aligned_row p = distribution(n, 1), q = distribution(n, 2);
  for (auto _ : state) benchmark::DoNotOptimize(ropex::kl_divergence(p.data(), q.data(), n));
  report(state, 2 * n * static_cast<std::int64_t>(sizeof(float)));
}

void BM_js_divergence(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const aligned_row p = distribution(n, 1), q = distribution(n, 2);
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
