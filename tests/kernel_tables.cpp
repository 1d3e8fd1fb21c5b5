// The kernel tables of every test binary, compiled once per build (ROPEX_SEPARATE_KERNELS; README,
// "Compile time"). The test sources only declare them.
#define ROPEX_DEFINE_KERNELS
#include <ropex/ropex.hpp>
