// The rotation kernels' tables, compiled once for the whole module in pip's build (setup.py):
// every other source is built with ROPEX_SEPARATE_KERNELS and only declares them (README,
// "Compile time"). The CMake build links its ropex_kernel_tables instead of this file.
#define ROPEX_DEFINE_KERNELS
#include <ropex/ropex.hpp>
