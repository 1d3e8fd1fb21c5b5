// ropex kernels against the memory roofline.
//
// Every rotation benchmark reports bytes/s counting one read and one write of the rotated tensor
// (cos/sin tables and positions are not counted), from the kernel's own time only. Paired with it
// in every iteration (bench/roofline.hpp, run_paired) is an in-place `x *= a` pass over the same
// number of bytes (AVX-512 when the CPU has it): the speed of light for an in-place streaming
// kernel at that moment on this machine. The counter `ratio` is the median over iterations of
// roofline time / kernel time, `roofline_GBps` the median roofline speed; bench/run prints both.
//   every type           the roofline runs on the kernel's own buffer (16-bit data read as
//                        floats) with a = 1 (a volatile): the bits stay, and the cache state is
//                        the same for both (shapes c, d; and this VM's L3 is 260 MiB, shared)
//   threads2/...         the two-thread roofline, split in halves as parallel_apply splits (one
//                        thread for decode, where parallel_apply starts no second thread)
//   shapes under 64 KiB  (d) 64 calls and 64 roofline passes per timed batch; `calls_per_iteration`
//                        says so, and time / calls_per_iteration is the time of one call
// `roofline/<bytes>` and `roofline2/<bytes>` are the same passes on their own, for information.
//
// Names: rope/<shape>/<type>/<layout>/<policy>/<path>/<isa>
//   shape  a 4096x32x128, b 512x32x128, c 64x32x128, d 1x32x128 (decode), e 4096x8x64
//   path   fly (exact cos/sin formed per token, block_angles.hpp) or table (precomputed cos_sin_table)
//   isa    dispatch (what run-time dispatch picks; named in the label) or a forced family
// naive/<shape>/<layout>: the textbook scalar loop (float angle, cosf/sinf per element).
// ceiling/<shape>/float/half: the rotation alone (AVX-512, else AVX2; fp32, half layout, heads of 64 or 128),
//   its cos/sin fixed in registers for the whole call: no angle work, no table rows, no dispatch.
//   What any exact-or-table kernel could reach at best on this machine; informational.
// threads2/...: rope through parallel_apply with 2 std::threads.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include <ropex/ropex.hpp>
#include <ropex/threads.hpp>

#include "roofline.hpp"


namespace {

using ropex::kernels::isa;

struct shape {
  const char* name;
  std::int64_t tokens, heads;
  int head_dim;
};
const shape shapes[] = {{"a", 4096, 32, 128}, {"b", 512, 32, 128}, {"c", 64, 32, 128}, {"d", 1, 32, 128}, {"e", 4096, 8, 64}};

using ropex_bench::aligned_buffer;
using ropex_bench::scale;

// The standalone roofline (informational: the ratios come from the paired passes).
void roofline(benchmark::State& state, std::size_t bytes, int threads) {
  aligned_buffer<float> x(bytes / sizeof(float));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0f;
  const float a = ropex_bench::runtime_one();  // the pass cannot be optimised away, values stay put
  for (auto _ : state) {
    scale(x.data(), x.size(), a, threads);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(2 * bytes));
}

// Runs `kernel` paired with the in-place roofline over the tensor's own bytes, read as floats with
// a = 1 (the bits stay as they were), so both passes see the same cache state. For 16-bit
// tensors a separate buffer would be wrong: with this VM's large shared L3, two 32 MiB buffers
// thrash where one stays resident, and both passes slow down by ~2x.
template <class T, class Kernel>
void run_against_roofline(benchmark::State& state, aligned_buffer<T>& x, int threads, Kernel kernel) {
  const std::size_t bytes = x.size() * sizeof(T);
  const float a = ropex_bench::runtime_one();
  float* roofline_data = reinterpret_cast<float*>(x.data());  // sizes are multiples of 64 bytes
  const std::size_t floats = bytes / sizeof(float);
  ropex_bench::run_paired(state, 2.0 * static_cast<double>(bytes), 2.0 * static_cast<double>(bytes),
                          ropex_bench::calls_per_timing(bytes), kernel,
                          [&] { scale(roofline_data, floats, a, threads); });
}

// ---- ropex ----------------------------------------------------------------------------------------
template <class T>
aligned_buffer<T> make_input(std::size_t n) {
  aligned_buffer<T> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = T(std::sin(0.001f * static_cast<float>(i % 100000)));
  return x;
}

ropex::rotary_embedding make_rope(const shape& s, ropex::layout pairing, bool yarn) {
  ropex::rope_config cfg{s.head_dim};
  cfg.layout = pairing;
  if (!yarn) return ropex::rotary_embedding(cfg, ropex::plain{});
  ropex::yarn y;
  y.factor = 4;
  y.original_max_position = 4096;
  return ropex::rotary_embedding(cfg, y);
}

// isa < 0: run-time dispatch's choice; otherwise a forced family. YaRN multiplies by its
// attention factor m != 1, so its benchmarks alternate apply and apply_inverse (the same kernel
// with 1/m) to keep the data finite; both count as one rotation pass.
template <class T>
void rope_bench(benchmark::State& state, shape s, ropex::layout pairing, bool yarn, bool table_path, int family,
                int threads) {
  const ropex::rotary_embedding rope = make_rope(s, pairing, yarn);
  aligned_buffer<T> x = make_input<T>(static_cast<std::size_t>(s.tokens * s.heads * s.head_dim));
  std::vector<std::int64_t> positions(static_cast<std::size_t>(s.tokens));
  for (std::int64_t t = 0; t < s.tokens; ++t) positions[static_cast<std::size_t>(t)] = s.tokens == 1 ? 4095 : t;
  const ropex::cos_sin_table table = rope.make_table(4096);
  const auto view = ropex::contiguous_view(x.data(), s.tokens, s.heads, s.head_dim);
  ropex::kernels::forced_isa guard(family < 0 ? ropex::kernels::selected_isa() : static_cast<isa>(family));
  bool forward = true;
  // parallel_apply runs one token range per thread and never more threads than tokens (threads.hpp,
  // for_token_ranges): decode (1 token) runs on the calling thread alone, so its paired roofline
  // does too, instead of paying a thread start per 16 KiB pass that the kernel does not pay.
  const int roofline_threads = static_cast<int>(std::min<std::int64_t>(threads, s.tokens));
  run_against_roofline(state, x, roofline_threads, [&] {
    if (threads > 1) {
      if (table_path)
        ropex::parallel_apply(rope, view, positions.data(), table, threads);
      else
        ropex::parallel_apply(rope, view, positions.data(), threads);
    } else if (table_path) {
      rope.apply(view, positions.data(), table);
    } else if (!yarn || forward) {
      rope.apply(view, positions.data());
    } else {
      rope.apply_inverse(view, positions.data());
    }
    forward = !forward;
  });
  state.SetLabel(ropex::kernel_isa());
}

// The textbook loop: float angle, cosf/sinf for every element of every head.
void naive_bench(benchmark::State& state, shape s, ropex::layout pairing) {
  aligned_buffer<float> x = make_input<float>(static_cast<std::size_t>(s.tokens * s.heads * s.head_dim));
  const int half = s.head_dim / 2;
  std::vector<float> inv(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) inv[static_cast<std::size_t>(i)] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(s.head_dim));
  run_against_roofline(state, x, 1, [&] {
    for (std::int64_t t = 0; t < s.tokens; ++t)
      for (std::int64_t h = 0; h < s.heads; ++h) {
        float* row = x.data() + (t * s.heads + h) * s.head_dim;
        for (int i = 0; i < half; ++i) {
          const float theta = static_cast<float>(s.tokens == 1 ? 4095 : t) * inv[static_cast<std::size_t>(i)];
          const float c = std::cos(theta), sn = std::sin(theta);
          float& a = pairing == ropex::layout::half ? row[i] : row[2 * i];
          float& b = pairing == ropex::layout::half ? row[i + half] : row[2 * i + 1];
          const float xa = a, xb = b;
          a = xa * c - xb * sn;
          b = xb * c + xa * sn;
        }
      }
  });
}

// The rotation with no angle work: every head rotated by the same W blocks of cos/sin held in
// registers (a unit rotation, so repeated passes keep the values' magnitudes).
#if ROPEX_BENCH_X86
template <int W>
__attribute__((target("avx512f"))) void rotate_fixed_avx512(float* x, std::int64_t rows) {
  constexpr int half = 16 * W;
  __m512 c[W], s[W];
  for (int i = 0; i < W; ++i) {
    c[i] = _mm512_set1_ps(0.6f);
    s[i] = _mm512_set1_ps(0.8f);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    float* head = x + r * 2 * half;
    for (int i = 0; i < W; ++i) {
      const __m512 a = _mm512_loadu_ps(head + 16 * i), b = _mm512_loadu_ps(head + half + 16 * i);
      _mm512_storeu_ps(head + 16 * i, _mm512_fmsub_ps(a, c[i], _mm512_mul_ps(b, s[i])));
      _mm512_storeu_ps(head + half + 16 * i, _mm512_fmadd_ps(b, c[i], _mm512_mul_ps(a, s[i])));
    }
  }
}

// The same with 256-bit vectors (CPUs without AVX-512). One cos and one sin register serve every
// block (W of each would be all 16 registers at heads of 128: spills the AVX-512 form has not),
// and the head is one unrolled run.
template <int W>
__attribute__((target("avx2,fma"))) void rotate_fixed_avx2(float* x, std::int64_t rows) {
  constexpr int half = 8 * W;
  const __m256 c = _mm256_set1_ps(0.6f), s = _mm256_set1_ps(0.8f);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* head = x + r * 2 * half;
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
      const __m256 a = _mm256_loadu_ps(head + 8 * i), b = _mm256_loadu_ps(head + half + 8 * i);
      _mm256_storeu_ps(head + 8 * i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
      _mm256_storeu_ps(head + half + 8 * i, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
    }
  }
}

void ceiling_bench(benchmark::State& state, shape s) {
  aligned_buffer<float> x = make_input<float>(static_cast<std::size_t>(s.tokens * s.heads * s.head_dim));
  const std::int64_t rows = s.tokens * s.heads;
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  run_against_roofline(state, x, 1, [&] {
    if (avx512) {
      if (s.head_dim == 64) rotate_fixed_avx512<2>(x.data(), rows);
      else rotate_fixed_avx512<4>(x.data(), rows);
    } else {
      if (s.head_dim == 64) rotate_fixed_avx2<4>(x.data(), rows);
      else rotate_fixed_avx2<8>(x.data(), rows);
    }
  });
  state.SetLabel(avx512 ? "avx512" : "avx2");
}
#endif

const char* layout_name(ropex::layout l) { return l == ropex::layout::half ? "half" : "interleaved"; }

void register_all() {
  const double min_time = 0.2;
  // Rooflines over every byte count used below (b and e share 8 MiB).
  for (std::size_t bytes : {std::size_t{64} << 20, std::size_t{32} << 20, std::size_t{8} << 20, std::size_t{1} << 20,
                            std::size_t{16} << 10}) {
    benchmark::RegisterBenchmark(("roofline/" + std::to_string(bytes)).c_str(), roofline, bytes, 1)->MinTime(min_time);
    if (bytes >= (std::size_t{8} << 20))
      benchmark::RegisterBenchmark(("roofline2/" + std::to_string(bytes)).c_str(), roofline, bytes, 2)->MinTime(min_time)->UseRealTime();
  }

  // Families: dispatch's choice first, then every other available one (forced).
  std::vector<std::pair<std::string, int>> families = {{"dispatch", -1}};
  for (isa f : ropex::kernels::available_isas())
    if (f != ropex::kernels::selected_isa())
      families.push_back({ropex::kernels::isa_name(f), static_cast<int>(f)});

  for (const shape& s : shapes)
    for (ropex::layout pairing : {ropex::layout::half, ropex::layout::interleaved})
      for (bool yarn : {false, true})
        for (bool table_path : {false, true})
          for (const auto& [family_name, family] : families) {
            const std::string name = std::string("rope/") + s.name + "/float/" + layout_name(pairing) + "/" +
                                     (yarn ? "yarn" : "plain") + "/" + (table_path ? "table" : "fly") + "/" + family_name;
            benchmark::RegisterBenchmark(name.c_str(), rope_bench<float>, s, pairing, yarn, table_path, family, 1)
                ->MinTime(min_time)->UseManualTime();
          }
  // (f): shape a in fp16 and bf16.
  for (int type = 0; type < 2; ++type)
    for (ropex::layout pairing : {ropex::layout::half, ropex::layout::interleaved})
      for (bool yarn : {false, true})
        for (bool table_path : {false, true})
          for (const auto& [family_name, family] : families) {
            const std::string name = std::string("rope/a/") + (type == 0 ? "float16/" : "bfloat16/") +
                                     layout_name(pairing) + "/" + (yarn ? "yarn" : "plain") + "/" +
                                     (table_path ? "table" : "fly") + "/" + family_name;
            if (type == 0)
              benchmark::RegisterBenchmark(name.c_str(), rope_bench<ropex::float16>, shapes[0], pairing, yarn,
                                           table_path, family, 1)->MinTime(min_time)->UseManualTime();
            else
              benchmark::RegisterBenchmark(name.c_str(), rope_bench<ropex::bfloat16>, shapes[0], pairing, yarn,
                                           table_path, family, 1)->MinTime(min_time)->UseManualTime();
          }
  for (const shape& s : shapes)
    for (ropex::layout pairing : {ropex::layout::half, ropex::layout::interleaved})
      benchmark::RegisterBenchmark((std::string("naive/") + s.name + "/" + layout_name(pairing)).c_str(), naive_bench, s,
                                   pairing)->MinTime(min_time)->UseManualTime();
#if ROPEX_BENCH_X86
  if (__builtin_cpu_supports("avx512f") || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    for (const shape& s : shapes)
      if (s.tokens > 1 && (s.head_dim == 64 || s.head_dim == 128))
        benchmark::RegisterBenchmark((std::string("ceiling/") + s.name + "/float/half").c_str(), ceiling_bench, s)
            ->MinTime(min_time)->UseManualTime();
#endif
  // Two threads (dispatch's family), plain policy.
  for (const shape& s : shapes)
    for (ropex::layout pairing : {ropex::layout::half, ropex::layout::interleaved})
      for (bool table_path : {false, true}) {
        const std::string name = std::string("threads2/") + s.name + "/float/" + layout_name(pairing) + "/plain/" +
                                 (table_path ? "table" : "fly") + "/dispatch";
        benchmark::RegisterBenchmark(name.c_str(), rope_bench<float>, s, pairing, false, table_path, -1, 2)
            ->MinTime(min_time)->UseManualTime();
      }
  for (ropex::layout pairing : {ropex::layout::half, ropex::layout::interleaved}) {
    benchmark::RegisterBenchmark((std::string("threads2/a/float16/") + layout_name(pairing) + "/plain/fly/dispatch").c_str(),
                                 rope_bench<ropex::float16>, shapes[0], pairing, false, false, -1, 2)
        ->MinTime(min_time)->UseManualTime();
    benchmark::RegisterBenchmark((std::string("threads2/a/bfloat16/") + layout_name(pairing) + "/plain/fly/dispatch").c_str(),
                                 rope_bench<ropex::bfloat16>, shapes[0], pairing, false, false, -1, 2)
        ->MinTime(min_time)->UseManualTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("ropex_kernel_isa", ropex::kernel_isa());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
