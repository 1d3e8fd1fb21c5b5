// What the translation units of the extension share: one bind_* function per topic, called from
// module.cpp, and the Python <-> C++ policy conversion.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include <ropex/ropex.hpp>

namespace ropex::python {

namespace py = pybind11;

void bind_policies(py::module_& m);   // policies.cpp: Plain ... LongRoPE, RopeConfig
void bind_rope(py::module_& m);       // rope.cpp: RotaryEmbedding
void bind_import(py::module_& m);     // import.cpp: ModelRope, config.json parsing
void bind_attention(py::module_& m);  // attention.cpp: softmax, entropy, divergences

// A policy object (Plain() ... LongRoPE(...), or None for Plain) as the C++ variant; TypeError for
// anything else.
scaling to_scaling(py::handle policy);
// The variant as a new Python policy object.
py::object from_scaling(const scaling& policy);

// Raises the Python exception `type` (TypeError, ValueError) with `message` (arrays.cpp).
[[noreturn]] void raise(PyObject* type, const std::string& message);

// Python's repr of a float ("4.0", "1.138629436111989"), for the reprs of the bound classes.
inline std::string float_repr(double v) { return py::repr(py::float_(v)); }

// "half" / "interleaved"; ValueError naming `layout` otherwise.
ropex::layout to_layout(const std::string& name);
const char* layout_name(ropex::layout l);

// The Python-facing RotaryEmbedding: the C++ object plus what its constructor was given.
struct rope_object {
  rotary_embedding rope;
  scaling policy;
  std::int64_t seq_len;
};

// Builds a RotaryEmbedding; std::invalid_argument (ValueError) names the field.
rope_object make_rope(const rope_config& config, const scaling& policy, std::int64_t seq_len);

}  // namespace ropex::python
