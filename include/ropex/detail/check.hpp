// Private: argument checks shared by every validating entry point.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/check.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace ropex::detail {

[[noreturn]] inline void fail(const std::string& field, const std::string& why) {
  throw std::invalid_argument("ropex: " + field + " " + why);
}

inline void require(bool ok, const std::string& field, const std::string& why) {
  if (!ok) fail(field, why);
}
// The form for literals: no std::string exists unless the check fails (entry points that run per
// call must not allocate).
inline void require(bool ok, const char* field, const char* why) {
  if (!ok) fail(field, why);
}

// Whether a * b (a, b >= 0) overflows int64; else product = a * b. A per-call check multiplies:
// a division takes 15-40 cycles, a tenth of what some decode-step calls take in all.
inline bool product_overflows(std::int64_t a, std::int64_t b, std::int64_t& product) {
#if defined(__GNUC__)
  return __builtin_mul_overflow(a, b, &product);
#else
  if (b != 0 && a > std::numeric_limits<std::int64_t>::max() / b) return true;
  product = a * b;
  return false;
#endif
}

inline void require_finite(double v, const std::string& field) {
  require(std::isfinite(v), field, "must be finite (got " + std::to_string(v) + ")");
}

inline void require_positive(double v, const std::string& field) {
  require_finite(v, field);
  require(v > 0, field, "must be > 0 (got " + std::to_string(v) + ")");
}

inline void require_non_negative(double v, const std::string& field) {
  require_finite(v, field);
  require(v >= 0, field, "must be >= 0 (got " + std::to_string(v) + ")");
}

// Largest |position| whose conversion to double is exact (2^53).
inline constexpr std::int64_t max_abs_position = std::int64_t{1} << 53;

}  // namespace ropex::detail
