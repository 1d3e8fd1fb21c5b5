// Every apply / apply_inverse / shift / shift_each entry point (1-D, q+k, table, multi-axis), the
// ONNX operator and the Hugging Face parity rotations perform no heap allocation: the hot path neither allocates nor throws, and
// checks build their messages only on failure. A counting global operator new sees every
// allocation of the process; only those inside the measured call are counted.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "catch.hpp"
#include "ropex/hf_parity.hpp"
#include "ropex/onnx.hpp"
#include "ropex/ropex.hpp"

namespace {
std::atomic<long> allocations{0};

void* counted(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* counted_aligned(std::size_t n, std::align_val_t alignment) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  const auto a = static_cast<std::size_t>(alignment);
  if (void* p = std::aligned_alloc(a, (n + a - 1) / a * a + (n == 0 ? a : 0))) return p;
  throw std::bad_alloc();
}
}  // namespace

// Under AddressSanitizer some of Catch2's registry objects come from the sanitizer's operator new
// and are freed through the replacement above (free()); ASan reports that pairing as a mismatch
// although both sides use malloc's heap. Only this binary turns the check off.
#if defined(__SANITIZE_ADDRESS__)
#define ROPEX_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROPEX_TEST_ASAN 1
#endif
#endif
#ifdef ROPEX_TEST_ASAN
extern "C" const char* __asan_default_options() { return "alloc_dealloc_mismatch=0"; }
#endif

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_aligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

template <class F>
long allocations_of(const F& call) {
  const long before = allocations.load();
  call();
  return allocations.load() - before;
}

using ropex::kernels::isa;

std::vector<isa> families() { return ropex::kernels::available_isas(); }

template <class T>
void check_rotations(const ropex::rope_config& config, std::int64_t tokens) {
  const ropex::rotary_embedding rope(config, ropex::yarn{4, 4096});
  const std::int64_t q_heads = 4, k_heads = 2, d = config.head_dim, row = (q_heads + k_heads) * d;
  std::vector<T> buf(static_cast<std::size_t>(tokens * row), T(0.5f));
  std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) positions[static_cast<std::size_t>(t)] = 3 * t + 1;
  const ropex::cos_sin_table table = rope.make_table(3 * tokens + 8);  // also covers the multi-axis positions (7)
  ropex::tensor_view<T> q{buf.data(), tokens, q_heads, row, d};
  ropex::tensor_view<T> k{buf.data() + q_heads * d, tokens, k_heads, row, d};
  const std::int64_t* p = positions.data();
  const int pairs = ropex::pair_count(config);
  const std::vector<ropex::position_axes> options = {
      ropex::mrope({pairs / 4, pairs / 4, pairs - pairs / 2}), ropex::interleaved_mrope({pairs - 2 * (pairs / 3), pairs / 3, pairs / 3})};
  std::vector<std::int64_t> axis_data(static_cast<std::size_t>(3 * tokens), 7);

  for (isa family : families()) {
    ropex::kernels::forced_isa guard(family);
    INFO(ropex::kernels::isa_name(family) << ", head_dim " << d << ", " << tokens << " tokens");
    CHECK(allocations_of([&] { rope.apply(buf.data(), tokens, q_heads + k_heads, p); }) == 0);
    CHECK(allocations_of([&] { rope.apply(q, p); }) == 0);
    CHECK(allocations_of([&] { rope.apply(q, k, p); }) == 0);
    CHECK(allocations_of([&] { rope.apply(buf.data(), tokens, q_heads + k_heads, p, table); }) == 0);
    CHECK(allocations_of([&] { rope.apply(q, p, table); }) == 0);
    CHECK(allocations_of([&] { rope.apply(q, k, p, table); }) == 0);
    CHECK(allocations_of([&] { rope.apply_inverse(buf.data(), tokens, q_heads + k_heads, p); }) == 0);
    CHECK(allocations_of([&] { rope.apply_inverse(q, p); }) == 0);
    CHECK(allocations_of([&] { rope.apply_inverse(q, k, p); }) == 0);
    CHECK(allocations_of([&] { rope.apply_inverse(q, p, table); }) == 0);
    CHECK(allocations_of([&] { rope.apply_inverse(q, k, p, table); }) == 0);
    CHECK(allocations_of([&] { rope.shift(buf.data(), tokens, q_heads + k_heads, -5); }) == 0);
    CHECK(allocations_of([&] { rope.shift(k, 0); }) == 0);
    CHECK(allocations_of([&] { rope.shift_each(buf.data(), tokens, q_heads + k_heads, p); }) == 0);
    CHECK(allocations_of([&] { rope.shift_each(k, p); }) == 0);
    for (const ropex::position_axes& axes : options) {
      const ropex::axis_positions where{axis_data.data(), 3, 0};
      CHECK(allocations_of([&] { rope.apply(buf.data(), tokens, q_heads + k_heads, axes, where); }) == 0);
      CHECK(allocations_of([&] { rope.apply(q, axes, where); }) == 0);
      CHECK(allocations_of([&] { rope.apply(q, k, axes, where); }) == 0);
      CHECK(allocations_of([&] { rope.apply_inverse(q, axes, where); }) == 0);
      CHECK(allocations_of([&] { rope.apply(q, axes, where, table); }) == 0);
      CHECK(allocations_of([&] { rope.apply(q, k, axes, where, table); }) == 0);
      const std::int64_t deltas[3] = {-2, 3, 5};
      CHECK(allocations_of([&] { rope.shift(k, axes, deltas); }) == 0);
      CHECK(allocations_of([&] { rope.shift_each(k, axes, where); }) == 0);
    }
  }
}

template <class T>
void check_vision() {
  const ropex::rotary_embedding rope(ropex::rope_config{64, 32}, ropex::plain{});
  const std::int64_t tokens = 9, heads = 2;
  std::vector<T> buf(static_cast<std::size_t>(tokens * heads * 64), T(1.0f));
  std::vector<std::int64_t> rows_and_columns(static_cast<std::size_t>(2 * tokens), 2);
  const ropex::position_axes axes = ropex::vision_2d();
  for (isa family : families()) {
    ropex::kernels::forced_isa guard(family);
    INFO(ropex::kernels::isa_name(family));
    CHECK(allocations_of([&] {
            rope.apply(buf.data(), tokens, heads, axes, ropex::axis_positions{rows_and_columns.data(), 2, 0});
          }) == 0);
  }
}

template <class T>
void check_onnx() {
  const std::int64_t batch = 2, heads = 3, seq = 4, head_size = 32, half = 8;  // partial: R = 16
  std::vector<T> input(static_cast<std::size_t>(batch * heads * seq * head_size), T(0.25f)), output(input.size());
  std::vector<T> cos(static_cast<std::size_t>(16 * half), T(0.5f)), sin(cos.size(), T(0.5f));
  const std::vector<std::int64_t> shape4 = {batch, heads, seq, head_size}, shape3 = {batch, seq, heads * head_size};
  const std::vector<std::int64_t> cache_ids = {16, half}, cache_direct = {batch, seq, half};
  const std::vector<std::int64_t> ids = {0, 1, 2, 3, 15, 14, 13, 12};
  ropex::onnx_attributes attributes;
  attributes.rotary_embedding_dim = 2 * half;
  for (isa family : families()) {
    ropex::kernels::forced_isa guard(family);
    INFO(ropex::kernels::isa_name(family));
    for (bool interleaved : {false, true}) {
      attributes.interleaved = interleaved;
      attributes.num_heads = 0;
      CHECK(allocations_of([&] {
              ropex::onnx_rotary_embedding(input.data(), shape4, cos.data(), sin.data(), cache_ids, ids.data(),
                                           output.data(), attributes);
            }) == 0);
      attributes.num_heads = heads;
      CHECK(allocations_of([&] {
              ropex::onnx_rotary_embedding(input.data(), shape3, cos.data(), sin.data(), cache_direct, nullptr,
                                           output.data(), attributes);
            }) == 0);
    }
  }
}

// Both parity variants, full and partial rotary, q and k of a fused buffer (GQA: 4 and 2 heads),
// a decode call and a prefill over the prefetch threshold.
template <class T>
void check_hf_parity() {
  const std::int64_t q_heads = 4, k_heads = 2, d = 128, row = (q_heads + k_heads) * d;
  for (std::int64_t tokens : {std::int64_t{1}, std::int64_t{600}})
    for (std::int64_t r : {std::int64_t{128}, std::int64_t{64}}) {
      std::vector<T> buf(static_cast<std::size_t>(tokens * row), T(0.5f));
      std::vector<T> cos(static_cast<std::size_t>(tokens * r), T(0.5f)), sin(cos.size(), T(0.25f));
      const ropex::tensor_view<T> q{buf.data(), tokens, q_heads, row, d}, k{buf.data() + q_heads * d, tokens, k_heads, row, d};
      for (isa family : families()) {
        ropex::kernels::forced_isa guard(family);
        INFO(ropex::kernels::isa_name(family) << ", rotary_dim " << r << ", " << tokens << " tokens");
        CHECK(allocations_of([&] { ropex::apply_hf_rotate_half(q, cos.data(), sin.data(), r); }) == 0);
        CHECK(allocations_of([&] { ropex::apply_hf_rotate_half(k, cos.data(), sin.data(), r); }) == 0);
        CHECK(allocations_of([&] { ropex::apply_hf_rotate_half_interleave(q, cos.data(), sin.data(), r); }) == 0);
        CHECK(allocations_of([&] { ropex::apply_hf_rotate_half_interleave(k, cos.data(), sin.data(), r); }) == 0);
      }
    }
}

std::vector<int>* sink = nullptr;

}  // namespace

TEST_CASE("allocations: the counter sees an allocation", "[allocations]") {
  CHECK(allocations_of([] { sink = new std::vector<int>(100, 1); }) >= 1);
  delete sink;
}

TEST_CASE("allocations: 1-D, q+k, table, inverse, shift and multi-axis entry points allocate nothing",
          "[allocations]") {
  for (ropex::layout pairing : {ropex::layout::half, ropex::layout::interleaved})
    for (int rotary_dim : {0, 40})
      for (std::int64_t tokens : {std::int64_t{1}, std::int64_t{37}}) {
        const ropex::rope_config config{64, rotary_dim, 10000.0, pairing};
        check_rotations<float>(config, tokens);
        check_rotations<ropex::float16>(config, tokens);
        check_rotations<ropex::bfloat16>(config, tokens);
      }
  check_rotations<float>(ropex::rope_config{512, 0}, 3);  // more pairs than one 128-pair chunk
}

TEST_CASE("allocations: 2-D vision RoPE allocates nothing", "[allocations]") {
  check_vision<float>();
  check_vision<ropex::float16>();
  check_vision<ropex::bfloat16>();
}

TEST_CASE("allocations: the ONNX operator allocates nothing", "[allocations]") {
  check_onnx<float>();
  check_onnx<ropex::float16>();
  check_onnx<ropex::bfloat16>();
}

TEST_CASE("allocations: the Hugging Face parity rotations allocate nothing", "[allocations]") {
  check_hf_parity<float>();
  check_hf_parity<ropex::float16>();
  check_hf_parity<ropex::bfloat16>();
}

TEST_CASE("allocations: shift_cache of int8 and FP8 caches, rotated as codes, allocates nothing", "[allocations]") {
  const ropex::rotary_embedding rope(ropex::rope_config{64, 0, 10000.0, ropex::layout::half}, ropex::plain{});
  const std::int64_t num_blocks = 4, block_size = 8, kv_heads = 2, slots_total = num_blocks * block_size;
  std::vector<std::int64_t> slots(static_cast<std::size_t>(slots_total)), deltas(slots.size(), -7);
  for (std::int64_t s = 0; s < slots_total; ++s) slots[static_cast<std::size_t>(s)] = s;
  std::vector<std::int8_t> int8_k(static_cast<std::size_t>(slots_total * kv_heads * 64), 9);
  std::vector<ropex::float8_e4m3> fp8_k(int8_k.size(), ropex::float8_e4m3(0.75f));
  const ropex::kv_cache_view<std::int8_t> int8_cache{int8_k.data(), nullptr, num_blocks, block_size, kv_heads, 64};
  const ropex::kv_cache_view<ropex::float8_e4m3> fp8_cache{fp8_k.data(), nullptr, num_blocks, block_size, kv_heads, 64};
  for (isa family : families()) {
    ropex::kernels::forced_isa guard(family);
    INFO(ropex::kernels::isa_name(family));
    CHECK(allocations_of([&] { ropex::shift_cache(rope, int8_cache, slots.data(), slots_total, 5); }) == 0);
    CHECK(allocations_of([&] { ropex::shift_cache(rope, fp8_cache, slots.data(), slots_total, 5); }) == 0);
    CHECK(allocations_of([&] { ropex::shift_cache_each(rope, fp8_cache, slots.data(), slots_total, deltas.data()); }) == 0);
  }
}

TEST_CASE("allocations: a rejected call still names the field", "[allocations]") {
  const ropex::rotary_embedding rope(ropex::rope_config{64}, ropex::plain{});
  std::vector<float> x(64);
  const std::int64_t bad = std::int64_t{1} << 60;
  REQUIRE_THROWS_WITH(rope.shift(x.data(), 1, 1, bad), contains_text("delta"));
  REQUIRE_THROWS_WITH(rope.shift_each(x.data(), 1, 1, &bad), contains_text("deltas[0]"));
}
