// ropex._ropex: the compiled part of the `ropex` Python package (ropex/__init__.py re-exports it).
#include "bindings.hpp"

PYBIND11_MODULE(_ropex, m) {
  namespace py = pybind11;
  using namespace ropex::python;
  m.doc() = "ropex: RoPE kernels with exact angles and the context-extension policies of real checkpoints.";
  // Every std::invalid_argument from ropex names the field; pybind11 raises it as ValueError.
  bind_policies(m);
  bind_rope(m);
  bind_import(m);
  bind_attention(m);
  m.def("kernel_isa", &ropex::kernel_isa, "The kernel family in use: 'scalar', 'avx2', 'avx512' or 'neon'.");
  m.attr("__version__") = std::to_string(ROPEX_VERSION_MAJOR) + "." + std::to_string(ROPEX_VERSION_MINOR) + "." +
                          std::to_string(ROPEX_VERSION_PATCH);
}
