// Row-wise attention measurements (attention/softmax.hpp, attention/divergence.hpp) over
// C-contiguous float32 [rows, cols] arrays; ropex/__init__.py moves `axis` last and reshapes.
#include <pybind11/numpy.h>

#include <string>
#include <utility>

#include <ropex/attention.hpp>

#include "bindings.hpp"

namespace ropex::python {

namespace {

using rows_f = py::array_t<float, py::array::c_style | py::array::forcecast>;

void require_matrix(const py::array& a, const char* name) {
  if (a.ndim() != 2) throw std::invalid_argument(std::string("ropex: ") + name + " must be 2-D here");
}

distribution_options options_of(double tolerance, bool renormalize) {
  distribution_options o;
  o.tolerance = tolerance;
  o.renormalize = renormalize;
  return o;
}

// KL or JS per row; a failing row is named by its index among the flattened leading dimensions.
template <class F>
py::array_t<double> pair_rows(rows_f p, rows_f q, double tolerance, bool renormalize, F divergence) {
  require_matrix(p, "p");
  require_matrix(q, "q");
  if (p.shape(0) != q.shape(0) || p.shape(1) != q.shape(1))
    throw std::invalid_argument("ropex: p and q must have the same shape");
  const std::int64_t rows = p.shape(0), cols = p.shape(1);
  py::array_t<double> out(rows);
  double* o = out.mutable_data();
  const float *pp = p.data(), *qq = q.data();
  const distribution_options options = options_of(tolerance, renormalize);
  py::gil_scoped_release release;
  for (std::int64_t r = 0; r < rows; ++r) {
    try {
      o[r] = divergence(pp + r * cols, qq + r * cols, cols, options);
    } catch (const std::invalid_argument& e) {
      if (rows == 1) throw;
      throw std::invalid_argument(std::string(e.what()) + " (row " + std::to_string(r) + ")");
    }
  }
  return out;
}

}  // namespace

void bind_attention(py::module_& m) {
  using namespace pybind11::literals;
  m.def(
      "_softmax_rows",
      [](py::array_t<float, py::array::c_style> x) {
        require_matrix(x, "x");
        float* data = x.mutable_data();
        const std::int64_t rows = x.shape(0), cols = x.shape(1);
        py::gil_scoped_release release;
        softmax_rows(data, rows, cols);
      },
      "x"_a.noconvert());
  m.def(
      "_entropy_rows",
      [](rows_f p, bool bits, double tolerance, bool renormalize) {
        require_matrix(p, "p");
        const std::int64_t rows = p.shape(0), cols = p.shape(1);
        py::array_t<double> out(rows);
        if (rows == 0) return out;
        double* o = out.mutable_data();
        const float* data = p.data();
        const distribution_options options = options_of(tolerance, renormalize);
        py::gil_scoped_release release;
        entropy_rows(data, rows, cols, o, bits ? information_unit::bits : information_unit::nats, options);
        return out;
      },
      "p"_a, "bits"_a, "tolerance"_a, "renormalize"_a);
  using divergence = double (*)(const float*, const float*, std::int64_t, const distribution_options&);
  const std::pair<const char*, divergence> divergences[] = {
      {"_kl_rows", static_cast<divergence>(&kl_divergence)}, {"_js_rows", static_cast<divergence>(&js_divergence)}};
  for (const auto& [name, function] : divergences)
    m.def(
        name,
        [function = function](rows_f p, rows_f q, double tolerance, bool renormalize) {
          return pair_rows(std::move(p), std::move(q), tolerance, renormalize, function);
        },
        "p"_a, "q"_a, "tolerance"_a, "renormalize"_a);
}

}  // namespace ropex::python
