// Private: the exact seeds a thread formed last (block_angles.hpp), kept from one call to the next.
//
// Why: a decode step at position p rotates one token, and the seed of its block (the exact double
// sincos of every pair) costs more than rotating the token's heads; the step before it, at p - 1,
// was in the same block 15 times in 16. Engines alternate a few plans (apply and apply_inverse, a
// model's local and global layers), so a thread keeps four seeds and replaces the oldest.
//
// A seed depends on the kernel family that forms it, the frequencies (angle_steps::id names the
// plan's, with the address and count of the pairs taken), the magnitude, the sign and the block
// start (block_angles.hpp), and all of them key an entry: a seed found here has the bits of one
// formed anew. Entries hold up to `capacity` pairs; wider rotations keep their seed on the call's
// stack.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/kernels/seed_memo.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cstdint>

#include "ropex/kernels/rotation_batch.hpp"

namespace ropex::kernels {

// A family's cos_sin_seed (kernels/exact_cos_sin.inl): also the entry's family tag.
using seed_function = void (*)(std::int64_t position, const double* inv_freq, int n, double magnitude, double sign,
                               double* cos_out, double* sin_out);

struct seed_memo {
  static constexpr int entries = 4, capacity = 128;
  struct entry {
    seed_function family = nullptr;  // nullptr: empty
    std::uint64_t plan = 0;
    const double* inv_freq = nullptr;
    int n = 0;
    double magnitude = 0, sign = 0;
    std::int64_t start = 0;
    alignas(64) double cos[capacity];
    alignas(64) double sin[capacity];

    bool holds(seed_function f, const combined_angles& a, int pairs, std::int64_t block) const {
      return family == f && plan == a.plan && inv_freq == a.inv_freq && n == pairs && magnitude == a.magnitude &&
             sign == a.sign && start == block;
    }
  };
  entry slots[entries];
  int oldest = 0;

  // The entry with the seed of block `block` for angles `a` (a.plan != 0, pairs <= capacity);
  // when no entry holds it, form(cos, sin) writes it into the oldest one.
  template <class Form>
  const entry& find(seed_function family, const combined_angles& a, int pairs, std::int64_t block, Form&& form) {
    for (const entry& e : slots)
      if (e.holds(family, a, pairs, block)) return e;
    entry& e = slots[oldest];
    oldest = (oldest + 1) % entries;
    form(e.cos, e.sin);
    e.family = family;
    e.plan = a.plan;
    e.inv_freq = a.inv_freq;
    e.n = pairs;
    e.magnitude = a.magnitude;
    e.sign = a.sign;
    e.start = block;
    return e;
  }
};

// One per thread: nothing is shared between threads, and a call neither allocates nor locks.
inline thread_local seed_memo thread_seeds;

}  // namespace ropex::kernels
