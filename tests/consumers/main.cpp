// Consumer check shared by the find_package, add_subdirectory and pkg-config mini-projects:
// include the umbrella header, rotate one tiny head, compare one value with its closed form.
#include <ropex/ropex.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>

int main() {
  // head_dim 4, half layout, plain RoPE: pair 0 is (x[0], x[2]) with inv_freq 1 (docs/formulas.md
  // section 1), so at position 1 the unit vector e0 becomes (cos 1, 0, sin 1, 0).
  float x[4] = {1.0f, 0.0f, 0.0f, 0.0f};
  const std::int64_t position = 1;
  ropex::rope_config config{4};
  ropex::apply_rope(x, 1, 1, &position, config, ropex::plain{});
  // float32 result of a rotation by an exactly-reduced angle: a few ulps of 1, far below 1e-6.
  const double error = std::fabs(static_cast<double>(x[0]) - std::cos(1.0)) +
                       std::fabs(static_cast<double>(x[2]) - std::sin(1.0));
  std::printf("ropex %d.%d.%d consumer: x = (%.7f, %.7f, %.7f, %.7f), kernel_isa = %s, error = %.3g\n",
              ROPEX_VERSION_MAJOR, ROPEX_VERSION_MINOR, ROPEX_VERSION_PATCH, static_cast<double>(x[0]),
              static_cast<double>(x[1]), static_cast<double>(x[2]), static_cast<double>(x[3]),
              ropex::kernel_isa(), error);
  return error < 1e-6 && x[1] == 0.0f && x[3] == 0.0f ? 0 : 1;
}
