// Softmax, entropy, KL and JS as bytes/s of input (softmax: its values, read and written in place;
// entropy: its values; KL and JS: both operands), each paired in every iteration with the
// in-place roofline `x *= a` of bench/roofline.hpp over as many bytes (run_paired):
//   ratio = median over iterations of (roofline time / kernel time)
// i.e. how long the kernel takes against one streaming in-place pass over its input, measured at
// the same moment (this VM's bandwidth drifts ~2x between minutes). roofline_GBps counts the
// roofline's bytes the same way (its buffer once), so bytes_per_second / roofline_GBps ~ ratio.
//
//   softmax/<n>, entropy/<n>, kl_divergence/<n>, js_divergence/<n>      one row of n floats (KL, JS:
//       two); the roofline runs on the row's own buffer with a = 1 (same cache state). Rows under
//       64 KiB (4K floats) time 64 calls per batch; `calls_per_iteration` says so.
//   <kernel>_matrix/<rows>x<cols>                                       every row of a 64 MiB
//       [rows x cols] probability matrix (KL, JS: row r of P against row r of Q, 2 x 64 MiB), as a
//       head's attention probabilities are analysed: entropy through entropy_rows (the batched
//       public API), softmax through softmax_rows, KL and JS through a loop of per-row calls
//       (there is no batched pair API).
//   roofline/<n>                                                        the pass alone (informational).
//
// What to expect (AVX-512, two 512-bit ports): the roofline moves 64 bytes per cycle or so while a
// 4K row sits in L1, and about 2.5 cycles per 64 bytes from L2 (32K rows). A logarithm costs 13
// vector operations (detail/table_log.hpp), so entropy needs ~18 operations = ~9 cycles per 16
// floats, JS ~26 per 16 pairs of floats, KL ~17, softmax ~25: compute-bound well below the L1
// roofline (ratios 0.05-0.11 at 4K) and 2.5-5.5x below the L2 one (0.19-0.40 at 32K). The 64 MiB
// matrices stream from DRAM, where a single core's roofline is far slower (~13 GB/s of buffer per
// pass on the 2-core VM, against ~50 from L2) and the kernels reach ratios of ~0.4 (softmax,
// which also writes) to ~0.5 (entropy) and ~0.65-0.75 (JS, KL): about what the row speed at 32K
// and the streaming time would give if they added up rather than overlapped. Both matrix shapes
// measure alike: the cost is per float, not per row.
// Run: ropex_attention_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//        --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <ropex/attention.hpp>

#include "../roofline.hpp"

namespace {

using aligned_floats = ropex_bench::aligned_buffer<float>;
constexpr std::int64_t kFloat = static_cast<std::int64_t>(sizeof(float));

// One distribution of n floats (sums to 1 within float rounding).
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

// [rows x cols], 64-byte aligned: row r is the one pattern rotated left by 97 r entries (a
// permutation, so every row is a distribution), which costs a memcpy per row instead of an LCG
// and a division per element.
aligned_floats distribution_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  const std::vector<float> pattern = distribution(cols, seed);
  aligned_floats m(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::size_t shift = static_cast<std::size_t>((97 * r) % cols), tail = static_cast<std::size_t>(cols) - shift;
    float* row = m.data() + r * cols;
    std::memcpy(row, pattern.data() + shift, tail * sizeof(float));
    std::memcpy(row + tail, pattern.data(), shift * sizeof(float));
  }
  return m;
}

// Pairs `kernel` over `input_bytes` of input with the roofline over the floats of `buffers`, in
// place with a = 1. The roofline always runs on the kernel's own input: for rows that keeps the
// cache state the kernel sees (the row is L1/L2-resident); for the 64 MiB matrices, which no
// cache holds, a separate buffer would measure the same and cost another 64-128 MiB, while writing
// the same values back keeps the inputs valid distributions, bit for bit, for entropy, KL and JS.
template <class Kernel>
void run_against_roofline(benchmark::State& state, std::vector<aligned_floats*> buffers, Kernel kernel) {
  double bytes = 0;
  for (const aligned_floats* b : buffers) bytes += static_cast<double>(b->size() * sizeof(float));
  const float a = ropex_bench::runtime_one();
  ropex_bench::run_paired(state, bytes, bytes, ropex_bench::calls_per_timing(static_cast<std::size_t>(bytes)), kernel,
                          [&] {
                            for (aligned_floats* b : buffers) ropex_bench::scale(b->data(), b->size(), a);
                          });
}

aligned_floats row(std::int64_t n, std::uint32_t seed) { return distribution_matrix(1, n, seed); }

// ---- one row ----------------------------------------------------------------------------------

void BM_roofline(benchmark::State& state, std::int64_t n) {
  aligned_floats x = row(n, 1);
  const float a = ropex_bench::runtime_one();
  for (auto _ : state) {
    ropex_bench::scale(x.data(), x.size(), a);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * kFloat);
}

void BM_softmax(benchmark::State& state, std::int64_t n) {
  aligned_floats x = row(n, 1);
  run_against_roofline(state, {&x}, [&] { ropex::softmax(x.data(), n); });  // softmax of a row is a row
}

void BM_entropy(benchmark::State& state, std::int64_t n) {
  aligned_floats p = row(n, 1);
  run_against_roofline(state, {&p}, [&] { benchmark::DoNotOptimize(ropex::entropy(p.data(), n)); });
}

void BM_kl_divergence(benchmark::State& state, std::int64_t n) {
  aligned_floats p = row(n, 1), q = row(n, 2);
  run_against_roofline(state, {&p, &q}, [&] { benchmark::DoNotOptimize(ropex::kl_divergence(p.data(), q.data(), n)); });
}

void BM_js_divergence(benchmark::State& state, std::int64_t n) {
  aligned_floats p = row(n, 1), q = row(n, 2);
  run_against_roofline(state, {&p, &q}, [&] { benchmark::DoNotOptimize(ropex::js_divergence(p.data(), q.data(), n)); });
}

// ---- every row of a matrix ------------------------------------------------------------------------

void BM_softmax_matrix(benchmark::State& state, std::int64_t rows, std::int64_t cols) {
  aligned_floats x = distribution_matrix(rows, cols, 1);
  run_against_roofline(state, {&x}, [&] { ropex::softmax_rows(x.data(), rows, cols); });
}

void BM_entropy_matrix(benchmark::State& state, std::int64_t rows, std::int64_t cols) {
  aligned_floats p = distribution_matrix(rows, cols, 1);
  std::vector<double> h(static_cast<std::size_t>(rows));
  run_against_roofline(state, {&p}, [&] {
    ropex::entropy_rows(p.data(), rows, cols, h.data());
    benchmark::DoNotOptimize(h.data());
  });
}

template <double (*Divergence)(const float*, const float*, std::int64_t)>
void BM_divergence_matrix(benchmark::State& state, std::int64_t rows, std::int64_t cols) {
  aligned_floats p = distribution_matrix(rows, cols, 1), q = distribution_matrix(rows, cols, 2);
  run_against_roofline(state, {&p, &q}, [&] {
    double sum = 0;
    for (std::int64_t r = 0; r < rows; ++r) sum += Divergence(p.data() + r * cols, q.data() + r * cols, cols);
    benchmark::DoNotOptimize(sum);
  });
}

void register_all() {
  for (std::int64_t n : {4096, 8192, 32768, 65536})
    benchmark::RegisterBenchmark(("roofline/" + std::to_string(n)).c_str(), BM_roofline, n);
  const struct {
    const char* name;
    void (*row)(benchmark::State&, std::int64_t);
    void (*matrix)(benchmark::State&, std::int64_t, std::int64_t);
  } kernels[] = {{"softmax", BM_softmax, BM_softmax_matrix},
                 {"entropy", BM_entropy, BM_entropy_matrix},
                 {"kl_divergence", BM_kl_divergence, BM_divergence_matrix<ropex::kl_divergence>},
                 {"js_divergence", BM_js_divergence, BM_divergence_matrix<ropex::js_divergence>}};
  for (const auto& k : kernels) {
    for (std::int64_t n : {4096, 32768})
      benchmark::RegisterBenchmark((std::string(k.name) + "/" + std::to_string(n)).c_str(), k.row, n)->UseManualTime();
    for (std::int64_t rows : {4096, 512}) {
      const std::int64_t cols = (std::int64_t{16} << 20) / rows;  // 64 MiB of float
      benchmark::RegisterBenchmark(
          (std::string(k.name) + "_matrix/" + std::to_string(rows) + "x" + std::to_string(cols)).c_str(), k.matrix, rows,
          cols)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
