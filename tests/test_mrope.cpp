// Multi-axis RoPE (include/ropex/axes.hpp) against long-double references written the way the
// reference implementations build their cos/sin (Hugging Face transformers Qwen2-VL, Qwen3-VL and
// the Qwen2-VL vision tower; Megatron/vLLM for the GPT-J layout), not from ropex's pair rules.
#include "catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <ropex/axes.hpp>

#include "reference.hpp"

using namespace ropex;
using ropex_test::require_rejected;
using ropex_test::random_floats;
using ropex_test::rotation_tolerance;
using ld = long double;

namespace {

constexpr std::int64_t k24 = std::int64_t{1} << 24;

// Positions [axes][tokens]: distinct per axis, up to 2^24, plus a text token (equal axes).
std::vector<std::int64_t> axis_positions_for(int axes, std::int64_t tokens) {
  const std::int64_t pool[] = {0, 1, 7, 4095, 4096, 131071, std::int64_t{1} << 20, k24 - 1, k24, 33, 250000, 12};
  std::vector<std::int64_t> p(static_cast<std::size_t>(axes * tokens));
  for (int a = 0; a < axes; ++a)
    for (std::int64_t t = 0; t < tokens; ++t)
      p[static_cast<std::size_t>(a * tokens + t)] = pool[static_cast<std::size_t>((t * 5 + a * 3) % 12)];
  for (int a = 0; a < axes; ++a) p[static_cast<std::size_t>(a * tokens)] = 1234;  // token 0: text token
  return p;
}

// ---- HF-style construction of the per-channel angle `emb` ---------------------------------------
// freqs[a][j] = positions[a][t] * inv[j], the angle of frequency j on axis a (HF: inv_freq @ pos).
std::vector<std::vector<ld>> axis_freqs(const std::vector<ld>& inv, const std::vector<std::int64_t>& p, int axes,
                                        std::int64_t tokens, std::int64_t t) {
  std::vector<std::vector<ld>> f(static_cast<std::size_t>(axes), std::vector<ld>(inv.size()));
  for (int a = 0; a < axes; ++a)
    for (std::size_t j = 0; j < inv.size(); ++j)
      f[static_cast<std::size_t>(a)][j] = static_cast<ld>(p[static_cast<std::size_t>(a * tokens + t)]) * inv[j];
  return f;
}
std::vector<ld> cat_twice(const std::vector<ld>& f) {  // HF emb = torch.cat((freqs, freqs), -1)
  std::vector<ld> e(f);
  e.insert(e.end(), f.begin(), f.end());
  return e;
}
std::vector<ld> repeat_interleave2(const std::vector<ld>& f) {  // GPT-J layout: emb.repeat_interleave(2)
  std::vector<ld> e;
  for (ld v : f) e.insert(e.end(), {v, v});
  return e;
}

// HF apply_multimodal_rotary_pos_emb (half layout): emb of every axis is cat(freqs, freqs);
// split the channels with mrope_section * 2 and take chunk c from axis c % n.
std::vector<ld> hf_sections_emb(const std::vector<std::vector<ld>>& f, const std::vector<int>& s) {
  std::vector<int> doubled(s);
  doubled.insert(doubled.end(), s.begin(), s.end());
  std::vector<ld> out;
  std::size_t ch = 0;
  for (std::size_t c = 0; c < doubled.size(); ++c) {
    const std::vector<ld> e = cat_twice(f[c % s.size()]);
    for (int k = 0; k < doubled[c]; ++k, ++ch) out.push_back(e[ch]);
  }
  return out;
}
// GPT-J layout M-RoPE (Megatron's rotary_interleaved branch, vLLM is_neox_style=False): select on
// the frequencies with mrope_section, then repeat_interleave(2).
std::vector<ld> gptj_sections_emb(const std::vector<std::vector<ld>>& f, const std::vector<int>& s) {
  std::vector<ld> sel;
  std::size_t j = 0;
  for (std::size_t c = 0; c < s.size(); ++c)
    for (int k = 0; k < s[c]; ++k, ++j) sel.push_back(f[c][j]);
  return repeat_interleave2(sel);
}
// HF Qwen3-VL apply_interleaved_mrope: freqs_t = freqs[0]; for dim 1, 2:
// freqs_t[..., slice(dim, 3 * s[dim], 3)] = freqs[dim][..., same slice].
std::vector<ld> qwen3_interleaved_freqs(const std::vector<std::vector<ld>>& f, const std::vector<int>& s) {
  std::vector<ld> out = f[0];
  for (std::size_t dim = 1; dim <= 2; ++dim)
    for (std::size_t idx = dim; idx < std::min<std::size_t>(out.size(), static_cast<std::size_t>(3 * s[dim])); idx += 3)
      out[idx] = f[dim][idx];
  return out;
}

// y = m (x cos(emb) + rotate(x) sin(emb)) on the first emb.size() channels; the rest copied.
// rotate = HF rotate_half for the half layout, rotate_every_two (-x1, x0) for interleaved.
struct reference_result {
  std::vector<ld> y;
  std::vector<double> tol;
};
// inv_relative_error: how far ropex's double inv_freq may be from the reference's (2^-52 covers
// one rounding of base^(-2i/r); policies that blend add a few more).
template <class EmbFn>
reference_result rotate_by_emb(const std::vector<float>& x, std::int64_t tokens, std::int64_t heads, int head_dim,
                               layout pairing, ld m, EmbFn emb_of_token, double inv_relative_error = std::ldexp(1.0, -52)) {
  reference_result r{std::vector<ld>(x.begin(), x.end()), std::vector<double>(x.size(), 0.0)};
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::vector<ld> emb = emb_of_token(t);
    const std::size_t n = emb.size(), R = n / 2;
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::size_t base = static_cast<std::size_t>((t * heads + h) * head_dim);
      for (std::size_t ch = 0; ch < n; ++ch) {
        ld rot;
        if (pairing == layout::half)
          rot = ch < R ? -static_cast<ld>(x[base + ch + R]) : static_cast<ld>(x[base + ch - R]);
        else
          rot = ch % 2 == 0 ? -static_cast<ld>(x[base + ch + 1]) : static_cast<ld>(x[base + ch - 1]);
        const ld xv = x[base + ch];
        r.y[base + ch] = m * (xv * std::cos(emb[ch]) + rot * std::sin(emb[ch]));
        // reference.hpp bound; angle error: reduction 2^-49 plus the double rounding of inv_freq.
        const double angle_error = std::ldexp(1.0, -49) + std::fabs(static_cast<double>(emb[ch])) * inv_relative_error;
        r.tol[base + ch] = rotation_tolerance(static_cast<double>(m), static_cast<double>(xv), static_cast<double>(rot), angle_error);
      }
    }
  }
  return r;
}

// Worst |y - ref| / tol over the rotated channels; pass-through channels must be bit-exact.
double worst_ratio(const std::vector<float>& x, const std::vector<float>& y, const reference_result& ref) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (ref.tol[i] == 0) {
      CHECK(std::memcmp(&x[i], &y[i], sizeof(float)) == 0);
      continue;
    }
    worst = std::max(worst, std::fabs(static_cast<double>(static_cast<ld>(y[i]) - ref.y[i])) / ref.tol[i]);
  }
  return worst;
}

const char* name_of(layout l) { return l == layout::half ? "half" : "interleaved"; }

// Every kernel family this build and CPU can run (the ISA registry's available rows).
using kernels::available_isas;

}  // namespace

TEST_CASE("M-RoPE sections: Qwen2-VL 16/24/24 matches HF's split by mrope_section*2", "[mrope]") {
  const std::vector<int> s = {16, 24, 24};
  for (kernels::isa isa : available_isas())
    for (layout pairing : {layout::half, layout::interleaved}) {
      kernels::forced_isa guard(isa);
      INFO("isa " << kernels::isa_name(isa) << " layout " << name_of(pairing));
      const rope_config c{128, 0, 1000000.0, pairing};
      const rotary_embedding re(c, plain{});
      const std::int64_t tokens = 12, heads = 3;
      const std::vector<std::int64_t> p = axis_positions_for(3, tokens);
      const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * 128), 21);
      std::vector<float> y = x;
      apply_multi_axis(re.config(), re.freqs(), y.data(), tokens, heads, mrope(s), axis_positions{p.data(), 3});
      const std::vector<ld> inv = ropex_test::plain_inv_freq_ld(1000000.0L, 128);
      const auto ref = rotate_by_emb(x, tokens, heads, 128, pairing, 1.0L, [&](std::int64_t t) {
        const auto f = axis_freqs(inv, p, 3, tokens, t);
        return pairing == layout::half ? hf_sections_emb(f, s) : gptj_sections_emb(f, s);
      });
      CHECK(worst_ratio(x, y, ref) <= 1.0);
    }
}

TEST_CASE("M-RoPE sections with partial rotary and a ggml-style 4th section", "[mrope]") {
  // vLLM: sum(mrope_section) == rotary_dim // 2, channels past rotary_dim pass through.
  // ggml carries 4 sections (t, h, w, e); a 4-entry option takes 4 position streams.
  struct tc {
    int head_dim, rotary_dim;
    std::vector<int> s;
  };
  for (const tc& k : {tc{128, 64, {8, 12, 12}}, tc{96, 96, {12, 12, 12, 12}}, tc{64, 64, {32}}})
    for (layout pairing : {layout::half, layout::interleaved}) {
      INFO("head_dim " << k.head_dim << " rotary_dim " << k.rotary_dim << " axes " << k.s.size() << " " << name_of(pairing));
      const rope_config c{k.head_dim, k.rotary_dim, 10000.0, pairing};
      const rotary_embedding re(c, plain{});
      const int axes = static_cast<int>(k.s.size());
      const std::int64_t tokens = 7, heads = 2;
      const std::vector<std::int64_t> p = axis_positions_for(axes, tokens);
      const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * k.head_dim), 23);
      std::vector<float> y = x;
      apply_multi_axis(re.config(), re.freqs(), contiguous_view(y.data(), tokens, heads, k.head_dim), mrope(k.s),
                       axis_positions{p.data(), axes});
      const std::vector<ld> inv = ropex_test::plain_inv_freq_ld(10000.0L, k.rotary_dim);
      const auto ref = rotate_by_emb(x, tokens, heads, k.head_dim, pairing, 1.0L, [&](std::int64_t t) {
        const auto f = axis_freqs(inv, p, axes, tokens, t);
        return pairing == layout::half ? hf_sections_emb(f, k.s) : gptj_sections_emb(f, k.s);
      });
      CHECK(worst_ratio(x, y, ref) <= 1.0);
    }
}

TEST_CASE("interleaved M-RoPE: Qwen3-VL 24/20/20 matches HF apply_interleaved_mrope", "[mrope]") {
  const std::vector<int> s = {24, 20, 20};
  for (kernels::isa isa : available_isas())
    for (layout pairing : {layout::half, layout::interleaved}) {
      kernels::forced_isa guard(isa);
      INFO("isa " << kernels::isa_name(isa) << " layout " << name_of(pairing));
      const rope_config c{128, 0, 5000000.0, pairing};
      const rotary_embedding re(c, plain{});
      const std::int64_t tokens = 12, heads = 2;
      const std::vector<std::int64_t> p = axis_positions_for(3, tokens);
      const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * 128), 25);
      std::vector<float> y = x;
      apply_multi_axis(re.config(), re.freqs(), y.data(), tokens, heads, interleaved_mrope(s), axis_positions{p.data(), 3});
      const std::vector<ld> inv = ropex_test::plain_inv_freq_ld(5000000.0L, 128);
      const auto ref = rotate_by_emb(x, tokens, heads, 128, pairing, 1.0L, [&](std::int64_t t) {
        const auto f = qwen3_interleaved_freqs(axis_freqs(inv, p, 3, tokens, t), s);
        return pairing == layout::half ? cat_twice(f) : repeat_interleave2(f);
      });
      CHECK(worst_ratio(x, y, ref) <= 1.0);
    }
}

TEST_CASE("2-D vision RoPE matches HF Qwen2-VL VisionRotaryEmbedding(head_dim/2)", "[mrope][vision]") {
  // Qwen2-VL ViT: embed 1280 / 16 heads = head_dim 80, theta 10000. HF: inv over dim = 40 gives
  // 20 frequencies base^(-2j/40); rotary_pos_emb = cat(row * inv, col * inv) (40 angles);
  // emb = cat(rotary_pos_emb, rotary_pos_emb) over all 80 channels, rotate_half.
  for (kernels::isa isa : available_isas())
    for (int head_dim : {80, 64, 72})
      for (layout pairing : {layout::half, layout::interleaved}) {
        kernels::forced_isa guard(isa);
        INFO("isa " << kernels::isa_name(isa) << " head_dim " << head_dim << " " << name_of(pairing));
        const rope_config c{head_dim, head_dim / 2, 10000.0, pairing};
        const rotary_embedding re(c, plain{});
        const std::int64_t tokens = 12, heads = 3;
        const std::vector<std::int64_t> p = axis_positions_for(2, tokens);
        const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * head_dim), 27);
        std::vector<float> y = x;
        apply_multi_axis(re.config(), re.freqs(), y.data(), tokens, heads, vision_2d(), axis_positions{p.data(), 2});
        std::vector<ld> inv_v(static_cast<std::size_t>(head_dim / 4));
        for (std::size_t j = 0; j < inv_v.size(); ++j)
          inv_v[j] = 1.0L / std::pow(10000.0L, static_cast<ld>(2 * j) / static_cast<ld>(head_dim / 2));
        const auto ref = rotate_by_emb(x, tokens, heads, head_dim, pairing, 1.0L, [&](std::int64_t t) {
          const auto f = axis_freqs(inv_v, p, 2, tokens, t);
          std::vector<ld> rc = f[0];
          rc.insert(rc.end(), f[1].begin(), f[1].end());
          return pairing == layout::half ? cat_twice(rc) : repeat_interleave2(rc);
        });
        CHECK(worst_ratio(x, y, ref) <= 1.0);
      }
}

TEST_CASE("axis assignment: a position on one axis moves exactly that axis's pairs", "[mrope]") {
  // Position 0 on every axis but one: cos = 1, sin = 0 leaves a pair bit-identical, so the pairs
  // that change are exactly the pairs of that axis. Expected sets written out from the HF rules.
  struct tc {
    const char* name;
    position_axes axes;
    int head_dim, rotary_dim;
    std::vector<std::vector<int>> pairs_of_axis;
  };
  auto range = [](int b, int e, int step = 1) {
    std::vector<int> v;
    for (int i = b; i < e; i += step) v.push_back(i);
    return v;
  };
  std::vector<int> qwen3_t = range(0, 60, 3);
  for (int i : {60, 61, 62, 63}) qwen3_t.push_back(i);
  const std::vector<tc> cases = {
      {"Qwen2-VL 16/24/24", mrope({16, 24, 24}), 128, 128, {range(0, 16), range(16, 40), range(40, 64)}},
      {"Qwen3-VL 24/20/20", interleaved_mrope({24, 20, 20}), 128, 128, {qwen3_t, range(1, 60, 3), range(2, 60, 3)}},
      {"vision head_dim 80", vision_2d(), 80, 40, {range(0, 20), range(20, 40)}},
  };
  for (const tc& k : cases)
    for (layout pairing : {layout::half, layout::interleaved}) {
      const rope_config c{k.head_dim, k.rotary_dim, 10000.0, pairing};
      const rotary_embedding re(c, plain{});
      const int axes = axis_count(k.axes), R = rotated_pairs(c, k.axes);
      for (int moved = 0; moved < axes; ++moved) {
        INFO(k.name << " " << name_of(pairing) << " axis " << moved);
        std::vector<std::int64_t> p(static_cast<std::size_t>(axes), 0);
        p[static_cast<std::size_t>(moved)] = 3;
        const std::vector<float> x = random_floats(static_cast<std::size_t>(k.head_dim), 29);
        std::vector<float> y = x;
        apply_multi_axis(re.config(), re.freqs(), y.data(), 1, 1, k.axes, axis_positions{p.data(), axes});
        std::vector<int> changed;
        for (int i = 0; i < R; ++i) {
          const std::size_t a = static_cast<std::size_t>(pairing == layout::half ? i : 2 * i);
          const std::size_t b = static_cast<std::size_t>(pairing == layout::half ? i + R : 2 * i + 1);
          if (std::memcmp(&x[a], &y[a], 4) != 0 || std::memcmp(&x[b], &y[b], 4) != 0) changed.push_back(i);
        }
        CHECK(changed == k.pairs_of_axis[static_cast<std::size_t>(moved)]);
        // And source_of_pair agrees with the written-out sets.
        for (int i : k.pairs_of_axis[static_cast<std::size_t>(moved)]) CHECK(source_of_pair(c, k.axes, i).axis == moved);
      }
    }
}

TEST_CASE("equal axes (text tokens) give 1-D RoPE bit for bit", "[mrope]") {
  // Same cos/sin routine, same kernel, same chunking: identical floats, for every kernel family,
  // both layouts, all storage types, rotary dims above one 128-pair chunk, positions to 2^24.
  struct tc {
    int head_dim, rotary_dim;
    position_axes axes;
  };
  const std::vector<tc> cases = {
      {128, 0, mrope({16, 24, 24})},          {128, 0, interleaved_mrope({24, 20, 20})},
      {128, 64, mrope({8, 12, 12})},          {80, 0, mrope({10, 10, 10, 10})},
      {512, 0, mrope({60, 100, 96})},         {512, 400, interleaved_mrope({70, 65, 65})},
      {66, 0, interleaved_mrope({11, 11, 11})},
  };
  const std::vector<std::int64_t> p1 = {0, 1, 5, 4096, 131071, std::int64_t{1} << 20, k24 - 1, k24, -k24, 999};
  const auto tokens = static_cast<std::int64_t>(p1.size());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (kernels::isa isa : available_isas())
      for (const tc& k : cases)
        for (layout pairing : {layout::half, layout::interleaved}) {
          kernels::forced_isa guard(isa);
          INFO("isa " << kernels::isa_name(isa) << " head_dim " << k.head_dim << " rotary_dim " << k.rotary_dim << " "
                      << name_of(pairing) << " bytes " << sizeof(T));
          const rotary_embedding re(rope_config{k.head_dim, k.rotary_dim, 10000.0, pairing}, yarn{4, 4096});
          const int axes = axis_count(k.axes);
          std::vector<std::int64_t> p;
          for (int a = 0; a < axes; ++a) p.insert(p.end(), p1.begin(), p1.end());
          const std::int64_t heads = 3;
          const std::vector<float> xf = random_floats(static_cast<std::size_t>(tokens * heads * k.head_dim), 31);
          std::vector<T> one(xf.size()), multi(xf.size());
          for (std::size_t i = 0; i < xf.size(); ++i) one[i] = multi[i] = T(xf[i]);
          re.apply(one.data(), tokens, heads, p1.data());
          apply_multi_axis(re.config(), re.freqs(), multi.data(), tokens, heads, k.axes, axis_positions{p.data(), axes});
          CHECK(std::memcmp(one.data(), multi.data(), one.size() * sizeof(T)) == 0);
        }
  };
  run(float{});
  run(float16{});
  run(bfloat16{});
}

TEST_CASE("float16 and bfloat16 storage: within the float bound plus one storage rounding", "[mrope][types]") {
  const std::vector<int> s = {16, 24, 24};
  const rope_config c{128, 0, 1000000.0};
  const rotary_embedding re(c, plain{});
  const std::int64_t tokens = 12, heads = 2;
  const std::vector<std::int64_t> p = axis_positions_for(3, tokens);
  const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * 128), 33);
  auto run = [&](auto tag, double storage_u) {
    using T = decltype(tag);
    for (kernels::isa isa : available_isas()) {
      kernels::forced_isa guard(isa);
      INFO("isa " << kernels::isa_name(isa) << " bytes " << sizeof(T));
      std::vector<T> h(x.size());
      std::vector<float> xin(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        h[i] = T(x[i]);
        xin[i] = static_cast<float>(h[i]);  // the rotation sees the stored value
      }
      apply_multi_axis(re.config(), re.freqs(), h.data(), tokens, heads, mrope(s), axis_positions{p.data(), 3});
      const std::vector<ld> inv = ropex_test::plain_inv_freq_ld(1000000.0L, 128);
      const auto ref = rotate_by_emb(xin, tokens, heads, 128, layout::half, 1.0L,
                                     [&](std::int64_t t) { return hf_sections_emb(axis_freqs(inv, p, 3, tokens, t), s); });
      double worst = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double y = static_cast<double>(static_cast<float>(h[i]));
        const double r = static_cast<double>(ref.y[i]);
        // The float bound, then one rounding to storage (half an ulp of the result: |r| u_storage).
        worst = std::max(worst, std::fabs(y - r) / (ref.tol[i] + std::fabs(r) * storage_u));
      }
      CHECK(worst <= 1.0);
    }
  };
  run(float16{}, std::ldexp(1.0, -11));
  run(bfloat16{}, std::ldexp(1.0, -8));
}

TEST_CASE("q and k in one pass with GQA inside a fused qkv buffer", "[mrope][views]") {
  // Qwen2-VL-7B shape per token: [q: 28 heads][k: 4][v: 4], head_dim 128.
  const int d = 128;
  const std::int64_t tokens = 5, hq = 28, hk = 4, hv = 4, row = (hq + hk + hv) * d;
  const rotary_embedding re(rope_config{d, 0, 1000000.0}, plain{});
  const position_axes axes = mrope({16, 24, 24});
  const std::vector<std::int64_t> p = axis_positions_for(3, tokens);
  const std::vector<float> qkv0 = random_floats(static_cast<std::size_t>(tokens * row), 35);

  std::vector<float> fused = qkv0;
  tensor_view<float> q{fused.data(), tokens, hq, row, d}, k{fused.data() + hq * d, tokens, hk, row, d};
  apply_multi_axis(re.config(), re.freqs(), q, k, axes, axis_positions{p.data(), 3});

  std::vector<float> qc(static_cast<std::size_t>(tokens * hq * d)), kc(static_cast<std::size_t>(tokens * hk * d));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::copy_n(qkv0.begin() + t * row, hq * d, qc.begin() + t * hq * d);
    std::copy_n(qkv0.begin() + t * row + hq * d, hk * d, kc.begin() + t * hk * d);
  }
  apply_multi_axis(re.config(), re.freqs(), qc.data(), tokens, hq, axes, axis_positions{p.data(), 3});
  apply_multi_axis(re.config(), re.freqs(), kc.data(), tokens, hk, axes, axis_positions{p.data(), 3});
  bool same = true, v_untouched = true;
  for (std::int64_t t = 0; t < tokens; ++t) {
    same = same && std::memcmp(&fused[static_cast<std::size_t>(t * row)], &qc[static_cast<std::size_t>(t * hq * d)], static_cast<std::size_t>(hq * d) * 4) == 0;
    same = same && std::memcmp(&fused[static_cast<std::size_t>(t * row + hq * d)], &kc[static_cast<std::size_t>(t * hk * d)], static_cast<std::size_t>(hk * d) * 4) == 0;
    v_untouched = v_untouched && std::memcmp(&fused[static_cast<std::size_t>(t * row + (hq + hk) * d)],
                                             &qkv0[static_cast<std::size_t>(t * row + (hq + hk) * d)], static_cast<std::size_t>(hv * d) * 4) == 0;
  }
  CHECK(same);
  CHECK(v_untouched);
  CHECK(fused != qkv0);  // something was rotated

  // Token ranges (one per thread in an engine) with axis_stride = the full token count give the
  // same bits as one call over all tokens.
  std::vector<float> split(qc.size());
  for (std::int64_t t = 0; t < tokens; ++t) std::copy_n(qkv0.begin() + t * row, hq * d, split.begin() + t * hq * d);
  for (std::int64_t t0 : {std::int64_t{0}, std::int64_t{2}}) {
    const std::int64_t t1 = t0 == 0 ? 2 : tokens;
    apply_multi_axis(re.config(), re.freqs(), split.data() + t0 * hq * d, t1 - t0, hq, axes,
                     axis_positions{p.data() + t0, 3, tokens});
  }
  CHECK(split == qc);

  // <R q, R k> keeps the relative-position property per axis: shifting every axis of both by the
  // same delta leaves the score unchanged (M-RoPE's design, Qwen2-VL paper section 2.1).
  std::vector<float> q1(qkv0.begin(), qkv0.begin() + d), k1(qkv0.begin() + d, qkv0.begin() + 2 * d);
  auto score = [&](std::int64_t delta) {
    std::vector<float> a = q1, b = k1;
    const std::int64_t pq[3] = {10 + delta, 3 + delta, 5 + delta}, pk[3] = {4 + delta, 8 + delta, 1 + delta};
    apply_multi_axis(re.config(), re.freqs(), a.data(), 1, 1, axes, axis_positions{pq, 3});
    apply_multi_axis(re.config(), re.freqs(), b.data(), 1, 1, axes, axis_positions{pk, 3});
    double s = 0;
    for (int i = 0; i < d; ++i) s += static_cast<double>(a[static_cast<std::size_t>(i)]) * b[static_cast<std::size_t>(i)];
    return s;
  };
  // Each side is within (|a|+|b|) 3u per channel of exact; |q|,|k| <= 2 per channel, 128 channels.
  // Both scores carry that error: twice the bound for their difference.
  CHECK(std::fabs(score(0) - score(100000)) <= 2 * (2 * 128 * 4 * 4 * 3.1 * std::ldexp(1.0, -24)));
}

TEST_CASE("YaRN frequencies and attention factor flow through M-RoPE", "[mrope][policies]") {
  // Qwen2.5-VL-style text config with YaRN s 4, L 32768, base 1e6, r 128 (docs/formulas.md 2.6:
  // low/high 23/40, m = 0.1 ln 4 + 1 = 1.1386294361).
  for (layout pairing : {layout::half, layout::interleaved}) {
    const rope_config c{128, 0, 1000000.0, pairing};
    const rotary_embedding re(c, yarn{4, 32768});
    REQUIRE(re.freqs().attention_factor == Approx(1.1386294361).epsilon(1e-10));
    // YaRN inv_freq from the formulas in long double.
    std::vector<ld> inv = ropex_test::plain_inv_freq_ld(1000000.0L, 128);
    auto corr = [](ld rotations) { return 128.0L * std::log(32768.0L / (rotations * 2 * 3.14159265358979323846L)) / (2 * std::log(1000000.0L)); };
    const ld low = std::max(std::floor(corr(32)), 0.0L), high = std::min(std::ceil(corr(1)), 127.0L);
    REQUIRE(low == 23);
    REQUIRE(high == 40);
    for (std::size_t i = 0; i < inv.size(); ++i) {
      const ld ramp = std::clamp((static_cast<ld>(i) - low) / (high - low), 0.0L, 1.0L);
      inv[i] = inv[i] / 4 * ramp + inv[i] * (1 - ramp);
    }
    const std::vector<int> s = {16, 24, 24};
    const std::int64_t tokens = 12, heads = 2;
    const std::vector<std::int64_t> p = axis_positions_for(3, tokens);
    const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * 128), 37);
    std::vector<float> y = x;
    apply_multi_axis(re.config(), re.freqs(), y.data(), tokens, heads, mrope(s), axis_positions{p.data(), 3});
    // The YaRN blend (inv0/s) ramp + inv0 (1 - ramp) adds a few double roundings to inv_freq:
    // allow 2^-50 relative instead of 2^-52.
    const auto ref = rotate_by_emb(
        x, tokens, heads, 128, pairing, 1.1386294361119890618834464242916L,
        [&](std::int64_t t) {
          const auto f = axis_freqs(inv, p, 3, tokens, t);
          return pairing == layout::half ? hf_sections_emb(f, s) : gptj_sections_emb(f, s);
        },
        std::ldexp(1.0, -50));
    CHECK(worst_ratio(x, y, ref) <= 1.0);
  }
}

TEST_CASE("apply_multi_axis_inverse undoes apply_multi_axis", "[mrope][properties]") {
  for (const position_axes& axes : {mrope({16, 24, 24}), interleaved_mrope({24, 20, 20})}) {
    const rotary_embedding re(rope_config{128, 0, 1000000.0}, yarn{4, 32768});
    const std::int64_t tokens = 12, heads = 2;
    const std::vector<std::int64_t> p = axis_positions_for(3, tokens);
    const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * 128), 39);
    std::vector<float> y = x;
    apply_multi_axis(re.config(), re.freqs(), y.data(), tokens, heads, axes, axis_positions{p.data(), 3});
    apply_multi_axis_inverse(re.config(), re.freqs(), contiguous_view(y.data(), tokens, heads, 128), axes,
                             axis_positions{p.data(), 3});
    const double m = re.freqs().attention_factor;
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(y[i] - x[i])));
    // Two rotations, each within m (|a|+|b|) 3u <= 4 m 3u for |x| <= 2, the inverse divided by m.
    CHECK(worst <= 2 * 4 * 3.1 * std::ldexp(1.0, -24) * (1 + m));
  }
}

TEST_CASE("multi_axis_cos_sin returns the cos/sin the rotation uses", "[mrope]") {
  // Rotating the unit pair (1, 0) gives (m cos, m sin) exactly: 1*c - 0*s and 0*c + 1*s.
  struct tc {
    position_axes axes;
    int head_dim, rotary_dim;
  };
  for (const tc& k : {tc{mrope({16, 24, 24}), 128, 0}, tc{interleaved_mrope({24, 20, 20}), 128, 0}, tc{vision_2d(), 80, 40}}) {
    const rope_config c{k.head_dim, k.rotary_dim, 10000.0};
    const rotary_embedding re(c, yarn{2, 2048});
    const int axes = axis_count(k.axes), R = rotated_pairs(c, k.axes);
    const std::vector<std::int64_t> p = {k24, 77, 5, 3};
    std::vector<float> cos(static_cast<std::size_t>(R)), sin(static_cast<std::size_t>(R));
    multi_axis_cos_sin(re.config(), re.freqs(), k.axes, p.data(), cos.data(), sin.data());
    std::vector<float> x(static_cast<std::size_t>(k.head_dim), 0.0f);
    for (int i = 0; i < R; ++i) x[static_cast<std::size_t>(i)] = 1.0f;
    // positions [axes][1 token] is the same memory as one token's per-axis list.
    apply_multi_axis(re.config(), re.freqs(), x.data(), 1, 1, k.axes, axis_positions{p.data(), axes});
    for (int i = 0; i < R; ++i) {
      CHECK(x[static_cast<std::size_t>(i)] == cos[static_cast<std::size_t>(i)]);
      CHECK(x[static_cast<std::size_t>(i + R)] == sin[static_cast<std::size_t>(i)]);
    }
  }
}

TEST_CASE("bad multi-axis input throws naming the field and leaves the buffer untouched", "[mrope][bad-input]") {
  const rotary_embedding re(rope_config{128}, plain{});
  const rope_config& c = re.config();
  const frequencies& f = re.freqs();
  const std::int64_t tokens = 3, heads = 2;
  std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * 128), 41);
  std::vector<std::int64_t> p = {0, 1, 2, 0, 1, 2, 0, 1, 2};
  const axis_positions three{p.data(), 3};
  auto call = [&](const position_axes& a, axis_positions pos) {
    return [&, a, pos] { apply_multi_axis(c, f, x.data(), tokens, heads, a, pos); };
  };
  // Sections that do not sum to rotary_dim/2 = 64.
  require_rejected(x, call(mrope({16, 24, 23}), three), "mrope_section");
  require_rejected(x, call(mrope({16, 24, 24, 1}), axis_positions{p.data(), 4}), "sum to rotary_dim/2 = 64");
  require_rejected(x, call(interleaved_mrope({24, 20, 21}), three), "mrope_section");
  // Negative section.
  require_rejected(x, call(mrope({-8, 36, 36}), three), "mrope_section[0]");
  // Wrong axis count: positions given for 2 or 4 axes, 3 sections.
  require_rejected(x, call(mrope({16, 24, 24}), axis_positions{p.data(), 2}), "positions.axes");
  require_rejected(x, call(mrope({16, 24, 24}), axis_positions{p.data(), 4}), "positions.axes");
  require_rejected(x, call(position_axes{axis_assignment::vision_2d, {32, 32}}, axis_positions{p.data(), 2}),
                   "mrope_section");  // vision takes no sections
  require_rejected(x, call(mrope({}), axis_positions{p.data(), 0}), "mrope_section");
  require_rejected(x, call(mrope({16, 16, 16, 8, 8}), axis_positions{p.data(), 5}), "mrope_section");
  require_rejected(x, call(interleaved_mrope({32, 32}), axis_positions{p.data(), 2}), "mrope_section");
  // Interleaved counts the t,h,w round robin cannot honour (h asks 32, gets 21 of 64 pairs).
  require_rejected(x, call(interleaved_mrope({0, 32, 32}), three), "mrope_section[1]");
  // Vision needs rotary_dim == head_dim/2, and two position streams.
  require_rejected(x, call(vision_2d(), axis_positions{p.data(), 2}), "rotary_dim");
  {
    const rotary_embedding vit(rope_config{128, 64}, plain{});
    require_rejected(x, [&] { apply_multi_axis(vit.config(), vit.freqs(), x.data(), tokens, heads, vision_2d(), three); },
                     "positions.axes");
  }
  // Null positions, and one bad position (last token of the last axis) beyond 2^53.
  require_rejected(x, call(mrope({16, 24, 24}), axis_positions{nullptr, 3}), "positions");
  p[8] = (std::int64_t{1} << 53) + 1;
  require_rejected(x, call(mrope({16, 24, 24}), three), "positions[2][2]");
  p[8] = -(std::int64_t{1} << 53) - 1;
  require_rejected(x, [&] {
    apply_multi_axis_inverse(c, f, contiguous_view(x.data(), tokens, heads, 128), mrope({16, 24, 24}), three);
  }, "positions[2][2]");
  p[8] = std::numeric_limits<std::int64_t>::min();
  require_rejected(x, call(interleaved_mrope({24, 20, 20}), three), "positions[2][2]");
  p[8] = 2;
  // Views: q and k of different token counts; overlapping rows.
  tensor_view<float> q{x.data(), 3, 1, 256, 128}, k{x.data() + 128, 2, 1, 256, 128};
  require_rejected(x, [&] { apply_multi_axis(c, f, q, k, mrope({16, 24, 24}), three); }, "k.tokens");
  require_rejected(x, [&] { apply_multi_axis(c, f, tensor_view<float>{x.data(), 3, 2, 128, 64}, mrope({16, 24, 24}), three); }, "x");
  // An axis stride shorter than the call's tokens would read other tokens' positions.
  require_rejected(x, call(mrope({16, 24, 24}), axis_positions{p.data(), 3, 2}), "positions.axis_stride");
  // Frequencies of another rotary dim.
  const rotary_embedding other(rope_config{128, 64}, plain{});
  require_rejected(x, [&] { apply_multi_axis(c, other.freqs(), x.data(), tokens, heads, mrope({16, 24, 24}), three); }, "freqs");
  // multi_axis_cos_sin checks the same things.
  float cs[64], sn[64];
  REQUIRE_THROWS_WITH(multi_axis_cos_sin(c, f, mrope({16, 24, 25}), p.data(), cs, sn), contains_text("mrope_section"));
  REQUIRE_THROWS_WITH(multi_axis_cos_sin(c, f, mrope({16, 24, 24}), nullptr, cs, sn), contains_text("positions"));
  // validate() alone.
  REQUIRE_NOTHROW(validate(c, mrope({16, 24, 24})));
  REQUIRE_NOTHROW(validate(rope_config{80, 40}, vision_2d()));
  REQUIRE_THROWS_WITH(validate(c, position_axes{static_cast<axis_assignment>(7), {64}}), contains_text("assignment"));
  // Empty calls are fine with null pointers.
  REQUIRE_NOTHROW(apply_multi_axis(c, f, static_cast<float*>(nullptr), 0, 2, mrope({16, 24, 24}), axis_positions{nullptr, 3}));
}
