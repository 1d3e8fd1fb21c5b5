// The kernel tables of the build (ropex_kernel_tables in CMakeLists.txt; README, "Compile time"),
// compiled in three parts. The tests, benchmarks, tools and the Python module only declare them.
#define ROPEX_DEFINE_KERNELS
#include <ropex/ropex.hpp>

// The per-ISA variants that tests call directly, which the tables instantiate anyway: defined by
// name for the tests' extern declarations (the same file declares them there).
#include "../tests/kernel_variants.hpp"
