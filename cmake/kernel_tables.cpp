// The kernel tables of the test and benchmark binaries, compiled once per build in three parts
// (ropex_add_kernel_tables in CMakeLists.txt; README, "Compile time"). Their sources only declare them.
#define ROPEX_DEFINE_KERNELS
#include <ropex/ropex.hpp>
