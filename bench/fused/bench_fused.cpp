// Fused operations on Qwen3-8B shapes (q 32 heads, k and v 8 heads, head_dim 128, fp32) against
// the memory roofline and against the separate calls they replace.
//   norm/<tokens>/fused       norm_rope(q, k); roofline: in-place x *= a over q and k
//   norm/<tokens>/separate    rms_norm_heads(q), rms_norm_heads(k), apply(q, k); same roofline
//   norm/<tokens>/norm_only   rms_norm_heads(q), rms_norm_heads(k) alone; same roofline
//   append/<tokens>/<C>/fused     rope_append_kv into a paged cache of C; roofline: q scaled in
//                                 place, k and v read as float and written as rows of sizeof(C)
//                                 bytes (the bytes the operation must move, whatever C is)
//   append/<tokens>/<C>/separate  apply(q, k) in place, then k and v converted into the cache row
//                                 by row with the same vectorised codecs (an engine's rotary
//                                 kernel followed by its cache write)
//   Speedups: fused ratio / separate ratio, both paired with the same roofline, cancels the drift
//   of the machine between the two runs.
//   shift/<C>                 shift_cache of a 64 MiB K cache (every slot, one delta); roofline:
//                             x *= a over the cache's bytes. Compare int8 / fp8 with fp16-tensor,
//                             rope.shift of a contiguous fp16 tensor of 64 MiB (slots_per_second).
//   shift/float-tensor        rope.shift of a contiguous fp32 tensor of 64 MiB; same roofline.
// Counters as bench/roofline.hpp: ratio = median of roofline time / operation time per iteration.
#include <algorithm>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <ropex/ropex.hpp>

#include "../roofline.hpp"

namespace {

using ropex_bench::aligned_buffer;
using ropex_bench::scale;

constexpr int kHeadDim = 128;
constexpr std::int64_t kQHeads = 32, kKvHeads = 8;

const ropex::rotary_embedding& qwen3_rope() {
  static const ropex::rotary_embedding rope(ropex::rope_config{kHeadDim, 0, 1e6, ropex::layout::half}, ropex::plain{});
  return rope;
}

void fill(float* x, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = static_cast<float>(seed >> 8) * 0x1p-24f * 2.0f - 1.0f;
  }
}

std::vector<std::int64_t> positions_for(std::int64_t tokens) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) p[static_cast<std::size_t>(t)] = 8192 + t;
  return p;
}

enum class norm_form { fused, separate, norm_only };

void norm_rope_bench(benchmark::State& state, std::int64_t tokens, norm_form form) {
  const std::size_t q_n = static_cast<std::size_t>(tokens * kQHeads * kHeadDim), k_n = q_n / 4;
  aligned_buffer<float> q(q_n), k(k_n), weights(2 * kHeadDim);
  fill(q.data(), q_n, 1);
  fill(k.data(), k_n, 2);
  // Weights of one, read from memory like real ones: the benchmark normalises the same rows again
  // and again, and unequal weights would shrink the smaller channels by their ratio every pass
  // until they are subnormal (then every multiply takes a microcode assist: 3x slower rows).
  std::fill(weights.data(), weights.data() + 2 * kHeadDim, 1.0f);
  const ropex::rms_norm q_norm{weights.data()}, k_norm{weights.data() + kHeadDim};
  const auto positions = positions_for(tokens);
  const auto qv = ropex::contiguous_view(q.data(), tokens, kQHeads, kHeadDim);
  const auto kv = ropex::contiguous_view(k.data(), tokens, kKvHeads, kHeadDim);
  const ropex::rotary_embedding& rope = qwen3_rope();
  const double bytes = 2.0 * static_cast<double>((q_n + k_n) * sizeof(float));
  const float one = ropex_bench::runtime_one();
  ropex_bench::run_paired(
      state, bytes, bytes, ropex_bench::calls_per_timing(static_cast<std::size_t>(bytes / 2)),
      [&] {
        if (form == norm_form::fused) {
          ropex::norm_rope(rope, qv, kv, positions.data(), q_norm, k_norm);
        } else {
          ropex::rms_norm_heads(qv, q_norm, kHeadDim);
          ropex::rms_norm_heads(kv, k_norm, kHeadDim);
          if (form == norm_form::separate) rope.apply(qv, kv, positions.data());
        }
      },
      [&] {
        scale(q.data(), q_n, one);
        scale(k.data(), k_n, one);
      });
}

// The roofline of a cache write: n floats read, n elements of sizeof(C) bytes written (their low
// bytes: no conversion, only the memory traffic). The zero-masked narrowing forms with a full mask
// are the plain instructions; GCC 12's unmasked ones trip -Wmaybe-uninitialized.
#if ROPEX_BENCH_X86
template <std::size_t Bytes>
__attribute__((target("avx512f"))) void narrow_avx512(const float* from, void* to, std::size_t n) {
  auto* out = static_cast<unsigned char*>(to);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_castps_si512(_mm512_loadu_ps(from + i));
    if constexpr (Bytes == 4) _mm512_storeu_si512(out + 4 * i, v);
    else if constexpr (Bytes == 2) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), _mm512_maskz_cvtepi32_epi16(0xffff, v));
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_maskz_cvtepi32_epi8(0xffff, v));
  }
  for (; i < n; ++i) std::memcpy(out + Bytes * i, from + i, Bytes);
}
// AVX2: the low 16 or 8 bits of each lane by masking and unsigned packs (exact on masked lanes;
// the packs work per 128-bit half, the permute puts the halves in order).
template <std::size_t Bytes>
__attribute__((target("avx2"))) void narrow_avx2(const float* from, void* to, std::size_t n) {
  auto* out = static_cast<unsigned char*>(to);
  const __m256i mask = _mm256_set1_epi32(Bytes == 2 ? 0xffff : 0xff);
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v[4];
    for (int j = 0; j < 4; ++j) v[j] = _mm256_castps_si256(_mm256_loadu_ps(from + i + 8 * j));
    if constexpr (Bytes == 4) {
      for (int j = 0; j < 4; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * (i + 8 * j)), v[j]);
    } else {
      for (int j = 0; j < 4; ++j) v[j] = _mm256_and_si256(v[j], mask);
      const __m256i w0 = _mm256_permute4x64_epi64(_mm256_packus_epi32(v[0], v[1]), 0xD8);
      const __m256i w1 = _mm256_permute4x64_epi64(_mm256_packus_epi32(v[2], v[3]), 0xD8);
      if constexpr (Bytes == 2) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), w0);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i + 32), w1);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute4x64_epi64(_mm256_packus_epi16(w0, w1), 0xD8));
      }
    }
  }
  for (; i < n; ++i) std::memcpy(out + Bytes * i, from + i, Bytes);
}
#endif
template <class C>
void narrow(const float* from, C* to, std::size_t n) {
#if ROPEX_BENCH_X86
  static const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
  if (avx512) return narrow_avx512<sizeof(C)>(from, to, n);
  if (avx2) return narrow_avx2<sizeof(C)>(from, to, n);
#endif
  for (std::size_t i = 0; i < n; ++i) std::memcpy(reinterpret_cast<unsigned char*>(to) + sizeof(C) * i, from + i, sizeof(C));
}

template <class C>
void append_bench(benchmark::State& state, std::int64_t tokens, bool fused) {
  const std::size_t q_n = static_cast<std::size_t>(tokens * kQHeads * kHeadDim), kv_n = q_n / 4;
  aligned_buffer<float> q(q_n), k(kv_n), v(kv_n);
  aligned_buffer<C> k_rows(kv_n), v_rows(kv_n);
  fill(q.data(), q_n, 4);
  fill(k.data(), kv_n, 5);
  fill(v.data(), kv_n, 6);
  const std::int64_t block_size = 16, num_blocks = (tokens + block_size - 1) / block_size;
  aligned_buffer<C> cache_k(static_cast<std::size_t>(num_blocks * block_size * kKvHeads * kHeadDim)),
      cache_v(cache_k.size());
  ropex::kv_cache_view<C> cache{cache_k.data(), cache_v.data(), num_blocks, block_size, kKvHeads, kHeadDim};
  if constexpr (ropex::is_quantized_v<C>) cache.k_scale = cache.v_scale = 0.02f;
  std::vector<std::int64_t> slots(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) slots[static_cast<std::size_t>(t)] = t;
  const auto positions = positions_for(tokens);
  const ropex::rotary_embedding& rope = qwen3_rope();
  const auto qv = ropex::contiguous_view(q.data(), tokens, kQHeads, kHeadDim);
  const auto kv = ropex::contiguous_view(k.data(), tokens, kKvHeads, kHeadDim);
  const auto vv = ropex::contiguous_view(v.data(), tokens, kKvHeads, kHeadDim);
  const ropex::detail::row_codec<C> codec = ropex::detail::active_row_codec<C>();
  constexpr int token_elements = static_cast<int>(kKvHeads) * kHeadDim;
  // Read q, k, v; write q and the two cache rows.
  const double bytes = static_cast<double>((2 * q_n + 2 * kv_n) * sizeof(float) + 2 * kv_n * sizeof(C));
  const float one = ropex_bench::runtime_one();
  ropex_bench::run_paired(
      state, bytes, bytes, ropex_bench::calls_per_timing(static_cast<std::size_t>(bytes / 2)),
      [&] {
        if (fused) {
          ropex::rope_append_kv(rope, qv, kv, vv, positions.data(), slots.data(), cache);
          return;
        }
        rope.apply(qv, kv, positions.data());
        for (std::int64_t t = 0; t < tokens; ++t) {  // a slot's heads are one run of the nhd block
          const std::int64_t from = t * token_elements, to = ropex::detail::cache_row(cache, slots[std::size_t(t)], 0);
          codec.encode(k.data() + from, cache_k.data() + to, token_elements, cache.k_scale);
          codec.encode(v.data() + from, cache_v.data() + to, token_elements, cache.v_scale);
        }
      },
      [&] {
        scale(q.data(), q_n, one);
        narrow(k.data(), k_rows.data(), kv_n);
        narrow(v.data(), v_rows.data(), kv_n);
      });
}

template <class C>
void shift_bench(benchmark::State& state) {
  const std::int64_t block_size = 16, bytes = std::int64_t{64} << 20;
  const std::int64_t slots_total = bytes / static_cast<std::int64_t>(sizeof(C)) / (kKvHeads * kHeadDim);
  aligned_buffer<C> cache_k(static_cast<std::size_t>(slots_total * kKvHeads * kHeadDim));
  {
    aligned_buffer<float> values(cache_k.size());
    fill(values.data(), values.size(), 7);
    for (std::size_t i = 0; i < values.size(); ++i)
      cache_k[i] = ropex::detail::encode<C>(values[i], ropex::is_quantized_v<C> ? 0.02f : 1.0f);
  }
  ropex::kv_cache_view<C> cache{cache_k.data(), nullptr, slots_total / block_size, block_size, kKvHeads, kHeadDim};
  if constexpr (ropex::is_quantized_v<C>) cache.k_scale = 0.02f;
  std::vector<std::int64_t> slots(static_cast<std::size_t>(slots_total));
  for (std::int64_t s = 0; s < slots_total; ++s) slots[static_cast<std::size_t>(s)] = s;
  const ropex::rotary_embedding& rope = qwen3_rope();
  const float one = ropex_bench::runtime_one();
  std::int64_t delta = 1;
  ropex_bench::run_paired(
      state, 2.0 * static_cast<double>(bytes), 2.0 * static_cast<double>(bytes), 1,
      [&] {
        ropex::shift_cache(rope, cache, slots.data(), slots_total, delta);
        delta = -delta;  // back and forth, so quantized values do not drift away
      },
      [&] { scale(reinterpret_cast<float*>(cache_k.data()), static_cast<std::size_t>(bytes) / sizeof(float), one); });
  state.counters["slots_per_second"] =
      benchmark::Counter(static_cast<double>(slots_total) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

// rope.shift on a contiguous [slots][kv_heads][head_dim] tensor of 64 MiB: fp16 is the reference
// speed of the quantized caches; float takes the fp32 prefetch distance.
template <class T>
void shift_tensor_bench(benchmark::State& state) {
  const std::int64_t bytes = std::int64_t{64} << 20;
  const std::int64_t slots_total = bytes / static_cast<std::int64_t>(sizeof(T)) / (kKvHeads * kHeadDim);
  aligned_buffer<T> keys(static_cast<std::size_t>(bytes) / sizeof(T));
  {
    aligned_buffer<float> values(keys.size());
    fill(values.data(), values.size(), 8);
    for (std::size_t i = 0; i < values.size(); ++i) keys[i] = T(values[i]);
  }
  const auto view = ropex::contiguous_view(keys.data(), slots_total, kKvHeads, kHeadDim);
  const float one = ropex_bench::runtime_one();
  std::int64_t delta = 1;
  ropex_bench::run_paired(
      state, 2.0 * static_cast<double>(bytes), 2.0 * static_cast<double>(bytes), 1,
      [&] {
        qwen3_rope().shift(view, delta);
        delta = -delta;
      },
      [&] { scale(reinterpret_cast<float*>(keys.data()), static_cast<std::size_t>(bytes) / sizeof(float), one); });
  state.counters["slots_per_second"] =
      benchmark::Counter(static_cast<double>(slots_total) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

const int registered = [] {
  for (std::int64_t tokens : {std::int64_t{4096}, std::int64_t{16}, std::int64_t{1}})
    for (bool fused : {true, false}) {
      const std::string tail = std::to_string(tokens) + (fused ? "/fused" : "/separate");
      benchmark::RegisterBenchmark(("norm/" + tail).c_str(), norm_rope_bench, tokens,
                                   fused ? norm_form::fused : norm_form::separate)->UseManualTime();
      if (!fused)
        benchmark::RegisterBenchmark(("norm/" + std::to_string(tokens) + "/norm_only").c_str(), norm_rope_bench, tokens,
                                     norm_form::norm_only)->UseManualTime();
      const auto append = [&](const char* cache_type, auto bench) {
        benchmark::RegisterBenchmark(("append/" + std::to_string(tokens) + "/" + cache_type + (fused ? "/fused" : "/separate")).c_str(),
                                     bench, tokens, fused)->UseManualTime();
      };
      append("float", append_bench<float>);
      append("fp16", append_bench<ropex::float16>);
      append("int8", append_bench<std::int8_t>);
      append("fp8", append_bench<ropex::float8_e4m3>);
    }
  benchmark::RegisterBenchmark("shift/fp16-tensor", shift_tensor_bench<ropex::float16>)->UseManualTime();
  benchmark::RegisterBenchmark("shift/float-tensor", shift_tensor_bench<float>)->UseManualTime();
  benchmark::RegisterBenchmark("shift/fp16", shift_bench<ropex::float16>)->UseManualTime();
  benchmark::RegisterBenchmark("shift/int8", shift_bench<std::int8_t>)->UseManualTime();
  benchmark::RegisterBenchmark("shift/fp8", shift_bench<ropex::float8_e4m3>)->UseManualTime();
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
