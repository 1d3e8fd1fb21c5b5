// Exact cos/sin for a stream of tokens at a fraction of the per-token cost, by angle addition.
//
// Why: the exact angle (angles.hpp) and its double-precision sincos cost ~45 vector operations per
// 8 pairs -- more than rotating 32 heads with the result -- and the on-the-fly path pays it per
// token. Positions come in runs (a prefill is 0, 1, 2, ...), so the work is split three ways:
//   seed     cos/sin of the block start b = p - (p mod 16), exact (kernel cos_sin_seed), computed
//            once per block of 16 positions and kept while the tokens stay in that block;
//   step     cos/sin of k w for k < 16: a plan-time table (angle_steps; libm on the exact angle);
//   combine  cos(b w + k w) = cos(b w) cos(k w) - sin(b w) sin(k w), sin likewise: two products
//            per value (kernel cos_sin_combine), a quarter of the exact sincos.
// Each position starts from ITS OWN block start, so a value depends on (position, frequency,
// magnitude, sign, kernel family) only: never on which tokens share the call. Decode and prefill
// give the same bits for a position, and so do the table path, thread splits and M-RoPE axes.
//
// Error, absolute, for magnitude m (the attention factor): a seed value is within
// m (2^-49 + 2^-52 + 2^-53) of m cos(b w) (reduction, polynomial or libm, product); a step within
// 2^-53 of cos(k w); the combine adds |cos k w| e_c + |sin k w| e_s <= sqrt(2) max e from the seed,
// sqrt(2) m 2^-53 from the steps, and two roundings m 2^-53: in all below m 2^-48. Rounded to float,
// that is the correctly rounded value unless the exact one lies within m 2^-48 of a rounding
// boundary (then its neighbour, one float ulp away). Float32-angle pipelines err by up to 0.4-2.4
// rad at position 2^24 (angles.hpp).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ropex/angles.hpp"
#include "ropex/kernels/dispatch.hpp"

namespace ropex {

// cos/sin of k * inv_freq[i] for k in [0, angle_block): row k holds all pairs. Built once per
// plan (2 * 16 doubles per pair: 16 KiB for head_dim 128); independent of the kernel family.
class angle_steps {
 public:
  angle_steps() = default;
  explicit angle_steps(const std::vector<double>& inv_freq)
      : pairs_(static_cast<int>(inv_freq.size())), id_(next_id()) {
    const std::size_t n = static_cast<std::size_t>(angle_block) * inv_freq.size();
    cos_.resize(n);
    sin_.resize(n);
    for (int k = 0; k < angle_block; ++k)
      for (int i = 0; i < pairs_; ++i) {
        const double theta = reduced_angle(k, inv_freq[static_cast<std::size_t>(i)]);
        cos_[static_cast<std::size_t>(k * pairs_ + i)] = std::cos(theta);
        sin_[static_cast<std::size_t>(k * pairs_ + i)] = std::sin(theta);
      }
  }

  int pairs() const { return pairs_; }
  const double* cos_row(int k) const { return cos_.data() + k * pairs_; }
  const double* sin_row(int k) const { return sin_.data() + k * pairs_; }
  // Names these frequencies among every table made in the process (copies share it; 0: none):
  // what a kernel may key values derived from them by, where an address could be reused.
  std::uint64_t id() const { return id_; }

 private:
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> last{0};
    return ++last;
  }
  int pairs_ = 0;
  std::uint64_t id_ = 0;
  std::vector<double> cos_, sin_;
};

namespace detail {

// The seed of the block last used, kept by one call on its stack (no allocation, nothing shared
// between threads). A call keeps magnitude and sign fixed; the key is (block, frequencies, n).
struct block_seed {
  static constexpr int capacity = 128;
  std::int64_t start = 0;
  const double* inv = nullptr;
  int n = -1;
  alignas(64) double cos[capacity];
  alignas(64) double sin[capacity];

  // Makes this the seed of `position`'s block for inv_freq[0, count) (count <= capacity) and
  // returns k = position - block start, the step row to combine with.
  int reach(void (*seed_fn)(std::int64_t, const double*, int, double, double, double*, double*),
            std::int64_t position, const double* inv_freq, int count, double magnitude, double sign) {
    const std::int64_t s = block_start(position);
    if (s != start || inv_freq != inv || count != n) {
      seed_fn(s, inv_freq, count, magnitude, sign, cos, sin);
      start = s;
      inv = inv_freq;
      n = count;
    }
    return static_cast<int>(position - s);
  }
};

// cos/sin (floats, magnitude folded in) of `position` for pairs [first, first + n) of a plan whose
// frequencies are inv_freq and step table `steps`; n <= block_seed::capacity.
template <class T>
void block_cos_sin(const kernels::kernel_set<T>& kernel, block_seed& seed, const angle_steps& steps,
                   const double* inv_freq, int first, int n, std::int64_t position, double magnitude, double sign,
                   float* cos, float* sin) {
  const int k = seed.reach(kernel.cos_sin_seed, position, inv_freq + first, n, magnitude, sign);
  kernel.cos_sin_combine(seed.cos, seed.sin, steps.cos_row(k) + first, steps.sin_row(k) + first, n, sign, cos, sin);
}

}  // namespace detail
}  // namespace ropex
