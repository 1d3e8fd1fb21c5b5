// parallel_apply (threads.hpp): splitting by token ranges runs the same kernel on the same tokens,
// so the result is bit-identical to one apply() for any thread count (identical operations, no
// tolerance needed), and bad input throws before any data is written.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "catch.hpp"
#include <ropex/ropex.hpp>
#include <ropex/threads.hpp>

namespace {
std::vector<float> ramp(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(0.1f * static_cast<float>(i % 1000)) + 0.001f * static_cast<float>(i % 7);
  return x;
}
}  // namespace

TEST_CASE("parallel_apply equals apply for every thread count", "[threads]") {
  ropex::rope_config cfg{64};
  cfg.rotary_dim = 48;
  cfg.layout = ropex::layout::interleaved;
  const ropex::rotary_embedding rope(cfg, ropex::plain{});
  const std::int64_t tokens = 37, q_heads = 4, k_heads = 2, row = (q_heads + k_heads) * 64;
  std::vector<std::int64_t> positions(tokens);
  for (std::int64_t t = 0; t < tokens; ++t) positions[static_cast<std::size_t>(t)] = 1000 + 3 * t;
  const std::vector<float> input = ramp(static_cast<std::size_t>(tokens * row));
  const ropex::cos_sin_table table = rope.make_table(2000);

  std::vector<float> one = input, one_qk = input, one_table = input;
  rope.apply(ropex::contiguous_view(one.data(), tokens, q_heads + k_heads, 64), positions.data());
  rope.apply(ropex::tensor_view<float>{one_qk.data(), tokens, q_heads, row, 64},
             ropex::tensor_view<float>{one_qk.data() + q_heads * 64, tokens, k_heads, row, 64}, positions.data());
  rope.apply(ropex::contiguous_view(one_table.data(), tokens, q_heads + k_heads, 64), positions.data(), table);

  for (int threads : {1, 2, 3, 7, 64}) {
    INFO(threads << " threads");
    std::vector<float> x = input, qk = input, xt = input;
    ropex::parallel_apply(rope, ropex::contiguous_view(x.data(), tokens, q_heads + k_heads, 64), positions.data(), threads);
    ropex::parallel_apply(rope, ropex::tensor_view<float>{qk.data(), tokens, q_heads, row, 64},
                          ropex::tensor_view<float>{qk.data() + q_heads * 64, tokens, k_heads, row, 64},
                          positions.data(), threads);
    ropex::parallel_apply(rope, ropex::contiguous_view(xt.data(), tokens, q_heads + k_heads, 64), positions.data(), table,
                          threads);
    CHECK(x == one);
    CHECK(qk == one_qk);
    CHECK(xt == one_table);
    CHECK(x != input);  // something was rotated
  }
}

TEST_CASE("parallel_apply validates on the calling thread before writing", "[threads]") {
  ropex::rope_config cfg{32};
  const ropex::rotary_embedding rope(cfg, ropex::plain{});
  std::vector<float> x = ramp(10 * 2 * 32);
  const std::vector<float> before = x;
  std::vector<std::int64_t> positions(10, 5);
  positions[9] = (std::int64_t{1} << 53) + 1;  // bad, in the last thread's range
  auto view = ropex::contiguous_view(x.data(), 10, 2, 32);
  CHECK_THROWS_WITH(ropex::parallel_apply(rope, view, positions.data(), 4), contains_text("positions[9]"));
  CHECK(x == before);
  positions[9] = 5;
  CHECK_THROWS_WITH(ropex::parallel_apply(rope, view, positions.data(), 0), contains_text("threads"));
  const ropex::cos_sin_table table = rope.make_table(5);  // positions must be < 5
  CHECK_THROWS_WITH(ropex::parallel_apply(rope, view, positions.data(), table, 2), contains_text("positions[0]"));
  CHECK_THROWS_WITH(ropex::parallel_apply(rope, view, nullptr, 2), contains_text("positions"));
  CHECK(x == before);
  // Zero tokens: nothing to do, no thread started, no throw.
  CHECK_NOTHROW(ropex::parallel_apply(rope, ropex::contiguous_view(x.data(), 0, 2, 32), nullptr, 3));
}

TEST_CASE("parallel inverse, shift, shift_each and multi-axis apply equal their single calls", "[threads]") {
  const ropex::rope_config cfg{64, 0, 10000.0, ropex::layout::half};
  const ropex::rotary_embedding rope(cfg, ropex::yarn{4, 4096});
  const std::int64_t tokens = 29, heads = 3;
  std::vector<std::int64_t> positions(tokens), axes_data(static_cast<std::size_t>(3 * tokens));
  for (std::int64_t t = 0; t < tokens; ++t) positions[static_cast<std::size_t>(t)] = 5 * t - 40;
  for (std::size_t i = 0; i < axes_data.size(); ++i) axes_data[i] = static_cast<std::int64_t>(i % 11);
  const ropex::position_axes axes = ropex::mrope({8, 12, 12});
  const ropex::axis_positions where{axes_data.data(), 3, 0};
  const std::vector<float> input = ramp(static_cast<std::size_t>(tokens * heads * 64));
  auto view = [&](std::vector<float>& v) { return ropex::contiguous_view(v.data(), tokens, heads, 64); };

  std::vector<float> inverse = input, shifted = input, each = input, multi = input;
  rope.apply_inverse(view(inverse), positions.data());
  rope.shift(view(shifted), -77);
  rope.shift_each(view(each), positions.data());
  rope.apply(view(multi), axes, where);
  for (int threads : {1, 2, 5}) {
    INFO(threads << " threads");
    std::vector<float> a = input, b = input, c = input, d = input;
    ropex::parallel_apply_inverse(rope, view(a), positions.data(), threads);
    ropex::parallel_shift(rope, view(b), -77, threads);
    ropex::parallel_shift_each(rope, view(c), positions.data(), threads);
    ropex::parallel_apply(rope, view(d), axes, where, threads);
    CHECK(a == inverse);
    CHECK(b == shifted);
    CHECK(c == each);
    CHECK(d == multi);
  }
  std::vector<float> x = input;
  const std::int64_t huge = std::int64_t{1} << 60;
  CHECK_THROWS_WITH(ropex::parallel_shift(rope, view(x), huge, 2), contains_text("delta"));
  CHECK_THROWS_WITH(ropex::parallel_shift_each(rope, view(x), nullptr, 2), contains_text("deltas"));
  CHECK_THROWS_WITH(ropex::parallel_apply(rope, view(x), axes, ropex::axis_positions{axes_data.data(), 2, 0}, 2),
                    contains_text("positions.axes"));
  CHECK(x == input);
}

TEST_CASE("apply_inverse of q and k together undoes apply of both", "[threads][properties]") {
  const ropex::rotary_embedding rope(ropex::rope_config{64}, ropex::yarn{4, 4096});
  const std::int64_t tokens = 6, q_heads = 4, k_heads = 2, row = (q_heads + k_heads) * 64;
  std::vector<std::int64_t> positions = {0, 1, 2, 100, 5000, 1 << 20};
  const std::vector<float> input = ramp(static_cast<std::size_t>(tokens * row));
  std::vector<float> together = input, apart = input;
  ropex::tensor_view<float> q{together.data(), tokens, q_heads, row, 64}, k{together.data() + q_heads * 64, tokens, k_heads, row, 64};
  rope.apply(q, k, positions.data());
  rope.apply_inverse(q, k, positions.data());
  ropex::tensor_view<float> q2{apart.data(), tokens, q_heads, row, 64}, k2{apart.data() + q_heads * 64, tokens, k_heads, row, 64};
  rope.apply(q2, k2, positions.data());
  rope.apply_inverse(q2, positions.data());
  rope.apply_inverse(k2, positions.data());
  CHECK(together == apart);  // the same kernel on the same rows, so the same bits
  for (std::size_t i = 0; i < input.size(); ++i) CHECK(std::fabs(together[i] - input[i]) <= 1e-5f * (1 + std::fabs(input[i])));
}
