// The main example: every policy on a Llama-sized tensor (4096 tokens x 32 heads x 128), at the
// 4096 positions just below 2^24, against a long-double closed form, with float32-angle error
// (what HF/ggml-style pipelines get) for comparison, and single-thread throughput.
#include <ropex/ropex.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

struct row {
  const char* name;
  ropex::scaling policy;
};

// Max |y - exact| over all channels, where exact is the long-double 2x2 rotation per pair.
double max_error(const std::vector<float>& x, const std::vector<float>& y, const ropex::rotary_embedding& re,
                 const std::vector<std::int64_t>& positions, int heads, bool float32_angles) {
  const int d = re.config().head_dim, half = re.pairs();
  const long double m = re.freqs().attention_factor;
  double worst = 0;
  std::vector<long double> c(static_cast<std::size_t>(half)), s(static_cast<std::size_t>(half));
  std::vector<float> cf(static_cast<std::size_t>(half)), sf(static_cast<std::size_t>(half));
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (int i = 0; i < half; ++i) {
      const long double theta = static_cast<long double>(positions[t]) * re.freqs().inv_freq[static_cast<std::size_t>(i)];
      c[static_cast<std::size_t>(i)] = m * std::cos(theta);
      s[static_cast<std::size_t>(i)] = m * std::sin(theta);
      // HF style: float32 position times float32 inv_freq, rounded once (docs/formulas.md section 1).
      const float theta32 = static_cast<float>(positions[t]) * static_cast<float>(re.freqs().inv_freq[static_cast<std::size_t>(i)]);
      cf[static_cast<std::size_t>(i)] = static_cast<float>(m) * std::cos(theta32);
      sf[static_cast<std::size_t>(i)] = static_cast<float>(m) * std::sin(theta32);
    }
    for (int h = 0; h < heads; ++h) {
      const std::size_t base = (t * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h)) * static_cast<std::size_t>(d);
      for (int i = 0; i < half; ++i) {
        const std::size_t ia = base + static_cast<std::size_t>(i), ib = ia + static_cast<std::size_t>(half);
        const long double a = x[ia], b = x[ib];
        const long double ea = a * c[static_cast<std::size_t>(i)] - b * s[static_cast<std::size_t>(i)];
        const long double eb = b * c[static_cast<std::size_t>(i)] + a * s[static_cast<std::size_t>(i)];
        long double ya = y[ia], yb = y[ib];
        if (float32_angles) {
          ya = x[ia] * cf[static_cast<std::size_t>(i)] - x[ib] * sf[static_cast<std::size_t>(i)];
          yb = x[ib] * cf[static_cast<std::size_t>(i)] + x[ia] * sf[static_cast<std::size_t>(i)];
        }
        worst = std::max({worst, static_cast<double>(std::fabs(ya - ea)), static_cast<double>(std::fabs(yb - eb))});
      }
    }
  }
  return worst;
}

}  // namespace

int main() {
  const int tokens = 4096, heads = 32, head_dim = 128;
  const ropex::rope_config config{head_dim, 0, 500000.0, ropex::layout::half};
  std::vector<double> short_factor(64, 1.0), long_factor(64);
  for (int i = 0; i < 64; ++i) long_factor[static_cast<std::size_t>(i)] = 1.0 + 31.0 * i / 63.0;
  const std::vector<row> rows = {
      {"plain", ropex::plain{}},
      {"linear s=4", ropex::linear{4}},
      {"ntk s=8", ropex::ntk{8}},
      {"dynamic_ntk s=4", ropex::dynamic_ntk{4, 8192}},
      {"yarn s=16", ropex::yarn{16, 8192}},
      {"llama3 s=8", ropex::llama3{}},
      {"longrope s=32", ropex::longrope{short_factor, long_factor, 32, 8192}},
  };

  std::mt19937 gen(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * head_dim);
  for (float& v : x) v = uniform(gen);
  std::vector<std::int64_t> positions(tokens);
  for (int t = 0; t < tokens; ++t) positions[static_cast<std::size_t>(t)] = (std::int64_t{1} << 24) - tokens + t;

  std::printf("ropex %d.%d.%d, kernel %s: %d tokens x %d heads x %d, positions [2^24 - %d, 2^24)\n\n",
              ROPEX_VERSION_MAJOR, ROPEX_VERSION_MINOR, ROPEX_VERSION_PATCH, ropex::kernel_isa(), tokens, heads,
              head_dim, tokens);
  std::printf("%-17s %-9s %10s %23s %11s %13s %9s\n", "policy", "HF type", "attn fac", "inv_freq range",
              "max error", "f32-angle err", "GB/s");
  for (const row& r : rows) {
    const ropex::rotary_embedding re(config, r.policy, /*seq_len=*/1 << 24);
    std::vector<float> y = x;
    re.apply(y.data(), tokens, heads, positions.data());
    // Throughput: best of 5 passes over a warm copy (apply_inverse keeps the values bounded).
    std::vector<float> z = x;
    double seconds = 1e30;
    for (int pass = 0; pass < 5; ++pass) {
      const auto start = std::chrono::steady_clock::now();
      if (pass % 2 == 0)
        re.apply(z.data(), tokens, heads, positions.data());
      else
        re.apply_inverse(z.data(), tokens, heads, positions.data());
      seconds = std::min(seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const auto [lo, hi] = std::minmax_element(re.freqs().inv_freq.begin(), re.freqs().inv_freq.end());
    const double bytes = 2.0 * static_cast<double>(x.size()) * sizeof(float);  // read + write
    std::printf("%-17s %-9s %10.7f   [%9.3e, %9.3e] %11.3e %13.3e %9.2f\n", r.name, ropex::rope_type_name(r.policy),
                re.freqs().attention_factor, *lo, *hi, max_error(x, y, re, positions, heads, false),
                max_error(x, y, re, positions, heads, true), bytes / seconds / 1e9);
  }
  std::printf("\nmax error: |ropex - exact| over every channel (long-double 2x2 rotation per pair).\n"
              "f32-angle err: the same for float32 angles (float(p) * float(inv_freq)), as HF and ggml compute them.\n"
              "GB/s: read + write of the tensor, best of 5 single-thread passes.\n");
}
