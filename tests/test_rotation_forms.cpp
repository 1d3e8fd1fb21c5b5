// The rotation forms beyond apply(positions): the inverse through a table, multi-axis positions
// through a table, multi-axis context shifts, and the parallel version of every form. Each is
// checked against a form already tested against the closed forms, bit for bit where the two must
// agree exactly, and with the one extra rounding bounded where they may not.
#include "catch.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include <ropex/ropex.hpp>

#include "reference.hpp"

using namespace ropex;
using ropex_test::random_floats;
using ropex_test::require_rejected;

namespace {

template <class T>
std::vector<T> storage_of(const std::vector<float>& x) {
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = T(x[i]);
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// [axes][tokens] positions: distinct per axis, one text token (equal axes), all below `limit`.
std::vector<std::int64_t> positions_for(int axes, std::int64_t tokens, std::int64_t limit) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(axes * tokens));
  for (int a = 0; a < axes; ++a)
    for (std::int64_t t = 0; t < tokens; ++t) p[static_cast<std::size_t>(a * tokens + t)] = (t * 37 + a * 101) % limit;
  for (int a = 0; a < axes; ++a) p[static_cast<std::size_t>(a * tokens)] = 17;
  return p;
}

struct multi_axis_case {
  int head_dim, rotary_dim;
  position_axes axes;
};
const std::vector<multi_axis_case>& multi_axis_cases() {
  static const std::vector<multi_axis_case> cases = {
      {128, 0, mrope({16, 24, 24})},   {128, 0, interleaved_mrope({24, 20, 20})}, {128, 64, mrope({8, 12, 12})},
      {64, 32, vision_2d()},           {80, 0, mrope({10, 10, 10, 10})},           {512, 0, mrope({60, 100, 96})},
      {66, 0, interleaved_mrope({11, 11, 11})},
  };
  return cases;
}

}  // namespace

TEST_CASE("apply_inverse through a table equals the on-the-fly inverse", "[forms][table]") {
  // m = 1 (plain, ntk): the same bits. m != 1 (yarn): a row value fl(m cos) divided by m^2 and
  // rounded is within 2u/m of cos/m, the on-the-fly coefficient within u/m (u = 2^-24): 3u/m apart,
  // times |a| + |b| <= 4 is 12u/m; each side's result carries two more roundings of a value below
  // 3/m, 2 x 2 x 3u/m: at most 24u/m in all.
  const std::int64_t tokens = 23, heads = 3, positions_in_table = 5000;
  std::vector<std::int64_t> p(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) p[static_cast<std::size_t>(t)] = (t * 211) % positions_in_table;
  for (kernels::isa isa : kernels::available_isas())
    for (layout pairing : {layout::half, layout::interleaved})
      for (int rotary_dim : {0, 48, 300}) {
        kernels::forced_isa guard(isa);
        const rope_config cfg{rotary_dim == 300 ? 320 : 64, rotary_dim, 10000.0, pairing};
        INFO(kernels::isa_name(isa) << " " << (pairing == layout::half ? "half" : "interleaved") << " rotary_dim " << rotary_dim);
        const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * cfg.head_dim), 7);
        for (bool scaled : {false, true}) {
          const rotary_embedding rope = scaled ? rotary_embedding(cfg, yarn{8, 1024}) : rotary_embedding(cfg, ntk{4});
          const cos_sin_table table = rope.make_table(positions_in_table);
          std::vector<float> fly = x, tab = x;
          rope.apply_inverse(contiguous_view(fly.data(), tokens, heads, cfg.head_dim), p.data());
          rope.apply_inverse(contiguous_view(tab.data(), tokens, heads, cfg.head_dim), p.data(), table);
          if (!scaled) {
            CHECK(same_bits(fly, tab));
            continue;
          }
          const double m = rope.freqs().attention_factor;
          double worst = 0;
          for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(double(fly[i]) - double(tab[i])));
          CHECK(worst <= 24 * std::ldexp(1.0, -24) / m);
          CHECK(worst > 0);  // m != 1 really takes the divided rows
        }
      }
}

TEST_CASE("apply_inverse of q and k through a table undoes the apply through it", "[forms][table]") {
  const rope_config cfg{64, 0, 10000.0};
  const rotary_embedding rope(cfg, plain{});
  const cos_sin_table table = rope.make_table(4096);
  const std::int64_t tokens = 9;
  std::vector<std::int64_t> p(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) p[static_cast<std::size_t>(t)] = 4095 - 400 * t;
  const std::vector<float> q0 = random_floats(static_cast<std::size_t>(tokens * 4 * 64), 11);
  const std::vector<float> k0 = random_floats(static_cast<std::size_t>(tokens * 2 * 64), 12);
  std::vector<float> q = q0, k = k0, q_fly = q0, k_fly = k0;
  auto qv = [&](std::vector<float>& v) { return contiguous_view(v.data(), tokens, 4, 64); };
  auto kv = [&](std::vector<float>& v) { return contiguous_view(v.data(), tokens, 2, 64); };
  rope.apply(qv(q), kv(k), p.data(), table);
  rope.apply_inverse(qv(q), kv(k), p.data(), table);
  rope.apply(qv(q_fly), kv(k_fly), p.data());
  rope.apply_inverse(qv(q_fly), kv(k_fly), p.data());
  CHECK(q == q_fly);  // m = 1: both directions have the on-the-fly bits
  CHECK(k == k_fly);
  double worst = 0;
  for (std::size_t i = 0; i < q0.size(); ++i) worst = std::max(worst, std::fabs(double(q[i]) - double(q0[i])));
  CHECK(worst <= 2 * 4 * 3.1 * std::ldexp(1.0, -24));  // two rotations, |x| <= 2 (as the multi-axis inverse test)
}

TEST_CASE("multi-axis apply through a table has the on-the-fly bits", "[forms][table][mrope]") {
  const std::int64_t tokens = 13, heads = 2, positions_in_table = 3000;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (kernels::isa isa : kernels::available_isas())
      for (const multi_axis_case& k : multi_axis_cases())
        for (layout pairing : {layout::half, layout::interleaved}) {
          kernels::forced_isa guard(isa);
          INFO(kernels::isa_name(isa) << " head_dim " << k.head_dim << " " << (pairing == layout::half ? "half" : "interleaved") << " bytes " << sizeof(T));
          const rotary_embedding rope(rope_config{k.head_dim, k.rotary_dim, 10000.0, pairing}, yarn{4, 1024});
          const cos_sin_table table = rope.make_table(positions_in_table);
          const int axes = axis_count(k.axes);
          const std::vector<std::int64_t> p = positions_for(axes, tokens, positions_in_table);
          const axis_positions where{p.data(), axes};
          const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * k.head_dim), 5);
          std::vector<T> fly = storage_of<T>(x), tab = fly;
          rope.apply(contiguous_view(fly.data(), tokens, heads, k.head_dim), k.axes, where);
          rope.apply(contiguous_view(tab.data(), tokens, heads, k.head_dim), k.axes, where, table);
          CHECK(same_bits(fly, tab));
          // q and k together, GQA.
          const std::vector<float> kx = random_floats(static_cast<std::size_t>(tokens * 1 * k.head_dim), 6);
          std::vector<T> q1 = storage_of<T>(x), k1 = storage_of<T>(kx), q2 = q1, k2 = k1;
          rope.apply(contiguous_view(q1.data(), tokens, heads, k.head_dim),
                     contiguous_view(k1.data(), tokens, 1, k.head_dim), k.axes, where);
          rope.apply(contiguous_view(q2.data(), tokens, heads, k.head_dim),
                     contiguous_view(k2.data(), tokens, 1, k.head_dim), k.axes, where, table);
          CHECK(same_bits(q1, q2));
          CHECK(same_bits(k1, k2));
        }
  };
  run(float{});
  run(float16{});
  run(bfloat16{});
}

TEST_CASE("multi-axis shift turns each pair by its axis's delta", "[forms][shift][mrope]") {
  // With attention factor 1, shifting x by deltas is applying positions equal to the deltas for
  // every token: the same cos/sin routine, so the same bits. Equal deltas give the 1-D shift.
  const std::int64_t tokens = 11, heads = 3;
  for (kernels::isa isa : kernels::available_isas())
    for (const multi_axis_case& k : multi_axis_cases()) {
      kernels::forced_isa guard(isa);
      INFO(kernels::isa_name(isa) << " head_dim " << k.head_dim);
      const rotary_embedding rope(rope_config{k.head_dim, k.rotary_dim, 10000.0}, plain{});
      const int axes = axis_count(k.axes);
      const std::int64_t per_axis[4] = {-4096, 77, std::int64_t{1} << 24, 3};
      std::vector<std::int64_t> as_positions;
      for (int a = 0; a < axes; ++a) as_positions.insert(as_positions.end(), tokens, per_axis[a]);
      const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * k.head_dim), 3);
      auto view = [&](std::vector<float>& v) { return contiguous_view(v.data(), tokens, heads, k.head_dim); };
      std::vector<float> shifted = x, applied = x, each = x;
      rope.shift(view(shifted), k.axes, per_axis);
      rope.apply(view(applied), k.axes, axis_positions{as_positions.data(), axes});
      rope.shift_each(view(each), k.axes, axis_positions{as_positions.data(), axes});
      CHECK(shifted == applied);
      CHECK(each == applied);
      const std::int64_t same[4] = {-300, -300, -300, -300};
      std::vector<float> multi = x, one = x;
      rope.shift(view(multi), k.axes, same);
      if (k.axes.assignment != axis_assignment::vision_2d) {  // vision pairs span the head: no 1-D twin
        rope.shift(view(one), -300);
        CHECK(multi == one);
      }
    }
}

TEST_CASE("every parallel form equals its single call", "[forms][threads]") {
  const rope_config cfg{64, 0, 10000.0, layout::interleaved};
  const rotary_embedding rope(cfg, yarn{4, 4096});
  const cos_sin_table table = rope.make_table(1024);
  const std::int64_t tokens = 31;
  const position_axes axes = mrope({8, 12, 12});
  const std::vector<std::int64_t> p3 = positions_for(3, tokens, 1024);
  const axis_positions where{p3.data(), 3};
  std::vector<std::int64_t> p(p3.begin(), p3.begin() + tokens);
  const std::int64_t deltas[3] = {5, -9, 1000};
  const std::vector<float> q0 = random_floats(static_cast<std::size_t>(tokens * 4 * 64), 21);
  const std::vector<float> k0 = random_floats(static_cast<std::size_t>(tokens * 2 * 64), 22);
  auto qv = [&](std::vector<float>& v) { return contiguous_view(v.data(), tokens, 4, 64); };
  auto kv = [&](std::vector<float>& v) { return contiguous_view(v.data(), tokens, 2, 64); };
  // Each form: its single call, then its parallel call, on fresh copies of q (and k).
  struct form {
    const char* name;
    std::function<void(std::vector<float>&, std::vector<float>&)> single, parallel;
  };
  const int threads = 3;
  const std::vector<form> forms = {
      {"q+k table", [&](auto& q, auto& k) { rope.apply(qv(q), kv(k), p.data(), table); },
       [&](auto& q, auto& k) { parallel_apply(rope, qv(q), kv(k), p.data(), table, threads); }},
      {"q+k multi-axis", [&](auto& q, auto& k) { rope.apply(qv(q), kv(k), axes, where); },
       [&](auto& q, auto& k) { parallel_apply(rope, qv(q), kv(k), axes, where, threads); }},
      {"multi-axis table", [&](auto& q, auto&) { rope.apply(qv(q), axes, where, table); },
       [&](auto& q, auto&) { parallel_apply(rope, qv(q), axes, where, table, threads); }},
      {"inverse q+k", [&](auto& q, auto& k) { rope.apply_inverse(qv(q), kv(k), p.data()); },
       [&](auto& q, auto& k) { parallel_apply_inverse(rope, qv(q), kv(k), p.data(), threads); }},
      {"inverse table", [&](auto& q, auto&) { rope.apply_inverse(qv(q), p.data(), table); },
       [&](auto& q, auto&) { parallel_apply_inverse(rope, qv(q), p.data(), table, threads); }},
      {"inverse multi-axis", [&](auto& q, auto&) { rope.apply_inverse(qv(q), axes, where); },
       [&](auto& q, auto&) { parallel_apply_inverse(rope, qv(q), axes, where, threads); }},
      {"multi-axis shift", [&](auto& q, auto&) { rope.shift(qv(q), axes, deltas); },
       [&](auto& q, auto&) { parallel_shift(rope, qv(q), axes, deltas, threads); }},
      {"multi-axis shift_each", [&](auto& q, auto&) { rope.shift_each(qv(q), axes, where); },
       [&](auto& q, auto&) { parallel_shift_each(rope, qv(q), axes, where, threads); }},
  };
  for (const form& f : forms) {
    INFO(f.name);
    std::vector<float> q1 = q0, k1 = k0, q2 = q0, k2 = k0;
    f.single(q1, k1);
    f.parallel(q2, k2);
    CHECK(q1 != q0);  // the form did rotate
    CHECK(q1 == q2);
    CHECK(k1 == k2);
  }
}

TEST_CASE("seeds a thread keeps between calls never change a value", "[forms][decode]") {
  // Decode steps reuse the seed of the block the thread reached last (kernels/seed_memo.hpp):
  // every call must keep the bits of the table path, whose rows are formed anew, through a run of
  // positions (hits), apply / apply_inverse alternating (sign and magnitude in the key), more plans
  // than the memo keeps, and plans made again at the address of a dropped one with other
  // frequencies (where only the plan's id tells them apart).
  const std::int64_t heads = 4;
  for (kernels::isa isa : kernels::available_isas())
    for (layout pairing : {layout::half, layout::interleaved})
      for (int head_dim : {64, 128, 256}) {
        kernels::forced_isa guard(isa);
        INFO(kernels::isa_name(isa) << " " << (pairing == layout::half ? "half" : "interleaved") << " head_dim "
                                    << head_dim);
        const std::vector<float> x = random_floats(static_cast<std::size_t>(heads * head_dim), 11);
        std::optional<rotary_embedding> rope;
        for (int plan = 0; plan < 6; ++plan) {
          rope.reset();
          const rope_config cfg{head_dim, 0, 10000.0 * (plan + 1), pairing};
          if (plan % 2 == 0) rope.emplace(cfg, plain{});
          else rope.emplace(cfg, yarn{4, 1024});
          const cos_sin_table table = rope->make_table(64);
          for (std::int64_t p = 29; p < 64; p += plan % 3 == 0 ? 1 : 7)
            for (bool inverse : {false, true}) {
              std::vector<float> fly = x, tab = x, other = x;
              const std::int64_t position[1] = {p};
              const auto fly_view = contiguous_view(fly.data(), 1, heads, head_dim);
              const auto tab_view = contiguous_view(tab.data(), 1, heads, head_dim);
              const auto other_view = contiguous_view(other.data(), 1, heads, head_dim);
              if (inverse) {
                rope->apply(other_view, position);  // the same block under another key just before
                rope->apply_inverse(fly_view, position);
                if (plan % 2 == 1) continue;  // m != 1: the table's inverse divides by m^2 (tested above)
                rope->apply_inverse(tab_view, position, table);
              } else {
                rope->apply_inverse(other_view, position);
                rope->apply(fly_view, position);
                rope->apply(tab_view, position, table);
              }
              INFO("plan " << plan << " position " << p << (inverse ? " inverse" : ""));
              REQUIRE(same_bits(fly, tab));
            }
        }
      }
}

TEST_CASE("a thread's kept seed is found by the plan, not by the frequencies' address", "[forms][decode]") {
  // Frequencies rewritten in place under a new plan id (as a dropped plan's storage reused by the
  // next one): the kernels must form the new seed, giving the bits of a call that keeps none.
  const int pairs = 32;
  std::vector<double> inv_freq(pairs);
  for (kernels::isa isa : kernels::available_isas()) {
    kernels::forced_isa guard(isa);
    INFO(kernels::isa_name(isa));
    const kernels::kernel_set<float>& kernel = kernels::active_kernels<float>();
    for (int plan = 1; plan <= 3; ++plan) {
      for (int i = 0; i < pairs; ++i) inv_freq[std::size_t(i)] = std::pow(1e4 * plan, -double(i) / pairs);
      const angle_steps steps(inv_freq);
      const std::int64_t position = 1000;
      kernels::combined_angles angles;
      angles.position = position;
      angles.inv_freq = inv_freq.data();
      angles.step_cos = steps.cos_row(0);
      angles.step_sin = steps.sin_row(0);
      angles.step_stride = steps.pairs();
      const std::vector<float> x = random_floats(2 * pairs * 4, 5);
      std::vector<float> kept = x, anew = x;
      const auto rotate = [&](std::vector<float>& v, std::uint64_t id) {
        const tensor_view<float> view = contiguous_view(v.data(), 1, 4, 2 * pairs);
        angles.plan = id;
        kernel.rotate_combined(detail::rows_of(&view, 1), {0, pairs, pairs, layout::half, false}, angles);
      };
      rotate(kept, (std::uint64_t{1} << 62) + std::uint64_t(plan));  // an id no table takes: kept
      rotate(anew, 0);  // 0: formed on the call's stack
      REQUIRE(same_bits(kept, anew));
    }
  }
}

TEST_CASE("bad input to the new forms throws naming the field and changes nothing", "[forms][bad-input]") {
  const rope_config cfg{64, 0, 10000.0};
  const rotary_embedding rope(cfg, plain{});
  const cos_sin_table table = rope.make_table(100);
  const cos_sin_table other = rotary_embedding(rope_config{32, 0, 10000.0}, plain{}).make_table(100);
  const std::int64_t tokens = 4;
  std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * 2 * 64), 1);
  auto v = [&] { return contiguous_view(x.data(), tokens, 2, 64); };
  const position_axes axes = mrope({8, 12, 12});
  std::vector<std::int64_t> p3 = positions_for(3, tokens, 100), p(p3.begin(), p3.begin() + tokens);
  const std::int64_t huge = std::int64_t{1} << 60;
  require_rejected(x, [&] { rope.apply_inverse(v(), p.data(), other); }, "table");
  std::vector<std::int64_t> past = p;
  past[2] = 100;
  require_rejected(x, [&] { rope.apply_inverse(v(), past.data(), table); }, "positions[2]");
  std::vector<std::int64_t> p3_past = p3;
  p3_past[static_cast<std::size_t>(2 * tokens + 1)] = 100;
  require_rejected(x, [&] { rope.apply(v(), axes, axis_positions{p3_past.data(), 3}, table); }, "positions[2][1]");
  require_rejected(x, [&] { rope.apply(v(), axes, axis_positions{p3.data(), 3}, other); }, "table");
  const std::int64_t bad_deltas[3] = {1, huge, 2};
  require_rejected(x, [&] { rope.shift(v(), axes, bad_deltas); }, "deltas[1][0]");
  require_rejected(x, [&] { rope.shift(v(), axes, static_cast<const std::int64_t*>(nullptr)); }, "deltas");
  require_rejected(x, [&] { rope.shift_each(v(), axes, axis_positions{p3.data(), 2}); }, "deltas.axes");
  require_rejected(x, [&] { parallel_shift(rope, v(), axes, bad_deltas, 2); }, "deltas[1][0]");
  require_rejected(x, [&] { parallel_apply_inverse(rope, v(), past.data(), table, 2); }, "positions[2]");
}
