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
