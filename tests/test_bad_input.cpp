// Bad calls throw std::invalid_argument naming the field, and leave the buffer untouched.
#include "catch.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "reference.hpp"

using namespace ropex;
using ropex_test::require_rejected;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("apply_rope rejects invalid configs and policies before writing", "[bad-input]") {
  std::vector<float> x = ropex_test::random_floats(2 * 128, 1);
  const std::int64_t p[2] = {0, 1};
  auto with = [&](rope_config c, auto policy) { return [&x, &p, c, policy] { apply_rope(x.data(), 2, 1, p, c, policy); }; };
  require_rejected(x, with(rope_config{0}, plain{}), "head_dim");
  require_rejected(x, with(rope_config{128, 63}, plain{}), "rotary_dim");
  require_rejected(x, with(rope_config{128, -2}, plain{}), "rotary_dim");
  require_rejected(x, with(rope_config{128, 130}, plain{}), "rotary_dim");
  require_rejected(x, with(rope_config{128, 0, 1.0}, plain{}), "base");
  require_rejected(x, with(rope_config{128, 0, kNaN}, plain{}), "base");
  require_rejected(x, with(rope_config{128, 0, kInf}, plain{}), "base");
  require_rejected(x, with(rope_config{128}, linear{0}), "linear.factor");
  require_rejected(x, with(rope_config{128}, linear{kNaN}), "linear.factor");
  require_rejected(x, with(rope_config{128}, ntk{-1}), "ntk.factor");
  require_rejected(x, with(rope_config{128, 2}, ntk{2}), "rotary_dim");
  require_rejected(x, with(rope_config{128, 2}, dynamic_ntk{2, 2048}), "rotary_dim");
  require_rejected(x, with(rope_config{128}, dynamic_ntk{2, 0}), "dynamic_ntk.max_position");
  require_rejected(x, with(rope_config{128}, yarn{kInf, 2048}), "yarn.factor");
  require_rejected(x, with(rope_config{128}, yarn{4, 0}), "yarn.original_max_position");
  require_rejected(x, with(rope_config{128}, yarn{4, 2048, 1, 32}), "yarn.beta_fast");
  require_rejected(x, with(rope_config{128}, yarn{4, 2048, 32, 1, kNaN}), "yarn.mscale");
  require_rejected(x, with(rope_config{128}, yarn{4, 2048, 32, 1, 0, 0, -1}), "yarn.attention_factor");
  require_rejected(x, with(rope_config{128}, llama3{8, 4, 1}), "llama3.low_freq_factor");
  require_rejected(x, with(rope_config{128}, llama3{8, 1, 4, -5}), "llama3.original_max_position");
  require_rejected(x, with(rope_config{128}, longrope{std::vector<double>(63, 1.0), std::vector<double>(64, 1.0)}),
                   "longrope.short_factor");
  std::vector<double> bad(64, 1.0);
  bad[10] = 0;
  require_rejected(x, with(rope_config{128}, longrope{std::vector<double>(64, 1.0), bad}), "longrope.long_factor[10]");
  bad[10] = kNaN;
  require_rejected(x, with(rope_config{128}, longrope{bad, std::vector<double>(64, 1.0)}), "longrope.short_factor[10]");
  // Llama 4 uses equal band factors: legal.
  REQUIRE_NOTHROW(apply_rope(x.data(), 2, 1, p, rope_config{128}, llama3{16, 1, 1, 8192}));
}

TEST_CASE("apply rejects bad sizes, pointers and positions before writing", "[bad-input]") {
  const rotary_embedding re(rope_config{64}, yarn{4, 1024});
  std::vector<float> x = ropex_test::random_floats(3 * 2 * 64, 2);
  std::vector<std::int64_t> p = {0, 1, 2};
  require_rejected(x, [&] { re.apply(x.data(), -1, 2, p.data()); }, "tokens");
  require_rejected(x, [&] { re.apply(x.data(), 3, -2, p.data()); }, "heads");
  require_rejected(x, [&] { re.apply(static_cast<float*>(nullptr), 3, 2, p.data()); }, "data");
  require_rejected(x, [&] { re.apply(x.data(), 3, 2, nullptr); }, "positions");
  p[2] = (std::int64_t{1} << 53) + 1;  // only the last token is bad: nothing may be written
  require_rejected(x, [&] { re.apply(x.data(), 3, 2, p.data()); }, "positions[2]");
  p[2] = -(std::int64_t{1} << 53) - 1;
  require_rejected(x, [&] { re.apply_inverse(x.data(), 3, 2, p.data()); }, "positions[2]");
  p[2] = 2;
  require_rejected(x, [&] { re.shift(x.data(), 3, 2, std::numeric_limits<std::int64_t>::max()); }, "delta");
  // Overlapping rows: head_stride smaller than head_dim.
  require_rejected(x, [&] { re.apply(tensor_view<float>{x.data(), 3, 2, 128, 32}, p.data()); }, "x");
  require_rejected(x, [&] { re.apply(tensor_view<float>{x.data(), 3, 2, 64, 64}, p.data()); }, "x");
  // q and k must cover the same tokens.
  tensor_view<float> q{x.data(), 3, 1, 128, 64}, k{x.data() + 64, 2, 1, 128, 64};
  require_rejected(x, [&] { re.apply(q, k, p.data()); }, "k.tokens");
  // Table: position outside [0, n) and a table of another rotary dim.
  const cos_sin_table table = re.make_table(2);
  require_rejected(x, [&] { re.apply(x.data(), 3, 2, p.data(), table); }, "positions[2]");
  const cos_sin_table other = rotary_embedding(rope_config{64, 32}, plain{}).make_table(4);
  require_rejected(x, [&] { re.apply(x.data(), 3, 2, p.data(), other); }, "table");
  REQUIRE_THROWS_WITH(re.make_table(-1), contains_text("positions"));
  REQUIRE_THROWS_WITH(rotary_embedding(rope_config{64}, plain{}, -1), contains_text("seq_len"));
  // Empty calls are fine with null pointers.
  REQUIRE_NOTHROW(re.apply(static_cast<float*>(nullptr), 0, 2, nullptr));
  REQUIRE_NOTHROW(re.apply(static_cast<float*>(nullptr), 3, 0, p.data()));
}

TEST_CASE("q and k that share elements are refused before writing, fused qkv slices are not", "[bad-input]") {
  const rotary_embedding re(rope_config{64}, plain{});
  // One fused [tokens][q 2 heads | k 1 head | v 1 head] buffer, 3 tokens.
  const std::int64_t tokens = 3, stride = 4 * 64;
  std::vector<float> qkv = ropex_test::random_floats(static_cast<std::size_t>(tokens * stride), 3);
  const std::int64_t p[3] = {0, 1, 2};
  const tensor_view<float> q{qkv.data(), tokens, 2, stride, 64}, k{qkv.data() + 128, tokens, 1, stride, 64};
  REQUIRE_NOTHROW(re.apply(q, k, p));
  REQUIRE_NOTHROW(parallel_apply(re, q, k, p, 2));
  // k one head to the left: its rows are q's second heads.
  const tensor_view<float> k_on_q{qkv.data() + 64, tokens, 1, stride, 64};
  require_rejected(qkv, [&] { re.apply(q, k_on_q, p); }, "k");
  require_rejected(qkv, [&] { re.apply_inverse(q, k_on_q, p); }, "k");
  require_rejected(qkv, [&] { parallel_apply(re, q, k_on_q, p, 2); }, "k");
  REQUIRE_THROWS_WITH(re.apply(q, k_on_q, p), contains_text("rows q[0, 1] and k[0, 0]"));
  // Half a head off: rows share 32 channels.
  const tensor_view<float> k_half{qkv.data() + 96, tokens, 1, stride, 64};
  require_rejected(qkv, [&] { re.apply(q, k_half, p); }, "k");
  // The same tensor as q and k.
  require_rejected(qkv, [&] { re.apply(q, q, p); }, "k");
  // Head-major k inside q's range but between its rows: accepted.
  std::vector<float> spread = ropex_test::random_floats(static_cast<std::size_t>(2 * tokens * 128), 4);
  const tensor_view<float> q_spread{spread.data(), tokens, 1, 128, 64}, k_between{spread.data() + 64, tokens, 1, 128, 64};
  REQUIRE_NOTHROW(re.apply(q_spread, k_between, p));
}
