// The kernel tables of the build (ropex_kernel_tables in CMakeLists.txt; README, "Compile time"),
// compiled in three parts. The tests, benchmarks, tools and the Python module only declare them.
#define ROPEX_DEFINE_KERNELS
#include <ropex/ropex.hpp>
