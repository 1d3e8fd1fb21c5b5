// The kernel tables of every benchmark binary, compiled once per build (ROPEX_SEPARATE_KERNELS;
// README, "Compile time"). The benchmark sources only declare them.
#define ROPEX_DEFINE_KERNELS
#include <ropex/ropex.hpp>
