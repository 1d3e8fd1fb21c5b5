// The rotation kernels' tables, compiled once for the whole module: every other source is built
// with ROPEX_SEPARATE_KERNELS and only declares them (README, "Compile time").
#define ROPEX_DEFINE_KERNELS
#include <ropex/ropex.hpp>
