// Part 1 of the rotation kernels' tables (float and int8) for pip's build (setup.py), which compiles
// the three parts in parallel; every other source is built with ROPEX_SEPARATE_KERNELS and only
// declares them (README, "Compile time"). The CMake build links its ropex_kernel_tables instead.
#define ROPEX_DEFINE_KERNELS
#define ROPEX_KERNEL_PART 1
#include <ropex/ropex.hpp>
