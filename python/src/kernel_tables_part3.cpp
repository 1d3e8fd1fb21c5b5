// Part 3 of the rotation kernels' tables (bfloat16) for pip's build (setup.py), which compiles
// the three parts in parallel; every other source is built with ROPEX_SEPARATE_KERNELS and only
// declares them (README, "Compile time"). The CMake build links its ropex_kernel_tables instead.
#define ROPEX_DEFINE_KERNELS
#define ROPEX_KERNEL_PART 3
#include <ropex/ropex.hpp>
