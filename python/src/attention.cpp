// Row-wise attention measurements (attention/softmax.hpp, attention/divergence.hpp) over
// C-contiguous float32 [rows, cols] arrays; ropex/__init__.py checks the arguments, moves `axis`
// last and reshapes.
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

// The first row a measurement refused, and the C++ message.
struct row_failure {
  std::int64_t row = -1;
  std::string what;
};

// Runs measure(r) for every row with the GIL released; stops at the first row whose distribution
// is refused (std::invalid_argument).
template <class F>
row_failure each_row(std::int64_t rows, F measure) {
  row_failure failure;
  py::gil_scoped_release release;
  for (std::int64_t r = 0; r < rows; ++r) {
    try {
      measure(r);
    } catch (const std::invalid_argument& e) {
      failure.row = r;
      failure.what = e.what();
      break;
    }
  }
  return failure;
}

// The C++ message ("ropex: p sums to 1.2, not 1 within tolerance ... (pass
// distribution_options{.renormalize = true} ...)") in Python's words: the argument as the caller
// indexes it (name_row(field, row) from ropex/__init__.py: "p", "p[1, :]") and the keyword
// `renormalize=True` for the C++ option.
[[noreturn]] void raise_row_failure(const row_failure& failure, const py::object& name_row) {
  std::string why = failure.what;
  const std::string prefix = "ropex: ";
  if (why.compare(0, prefix.size(), prefix) == 0) why.erase(0, prefix.size());
  const std::size_t space = why.find(' ');
  const std::string field = why.substr(0, space);
  why = space == std::string::npos ? std::string() : why.substr(space + 1);
  const std::string cpp_option = "distribution_options{.renormalize = true}";
  const std::size_t option = why.find(cpp_option);
  if (option != std::string::npos) why.replace(option, cpp_option.size(), "renormalize=True");
  const std::string name = py::str(name_row(field, failure.row));
  raise(PyExc_ValueError, name + " " + why);
}

// KL or JS per row.
template <class F>
py::array_t<double> pair_rows(const rows_f& p, const rows_f& q, double tolerance, bool renormalize,
                              const py::object& name_row, F divergence) {
  require_matrix(p, "p");
  require_matrix(q, "q");
  if (p.shape(0) != q.shape(0) || p.shape(1) != q.shape(1))
    throw std::invalid_argument("ropex: p and q must have the same shape");
  const std::int64_t rows = p.shape(0), cols = p.shape(1);
  py::array_t<double> out(rows);
  double* o = out.mutable_data();
  const float *pp = p.data(), *qq = q.data();
  const distribution_options options = options_of(tolerance, renormalize);
  const row_failure failure =
      each_row(rows, [&](std::int64_t r) { o[r] = divergence(pp + r * cols, qq + r * cols, cols, options); });
  if (failure.row >= 0) raise_row_failure(failure, name_row);
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
  // The one-row measurements, row by row: a refused row is then named by its index (the rows
  // version names its own C++ argument).
  m.def(
      "_entropy_rows",
      [](const rows_f& p, bool bits, double tolerance, bool renormalize, const py::object& name_row) {
        require_matrix(p, "p");
        const std::int64_t rows = p.shape(0), cols = p.shape(1);
        py::array_t<double> out(rows);
        double* o = out.mutable_data();
        const float* data = p.data();
        const distribution_options options = options_of(tolerance, renormalize);
        const information_unit unit = bits ? information_unit::bits : information_unit::nats;
        const row_failure failure =
            each_row(rows, [&](std::int64_t r) { o[r] = entropy(data + r * cols, cols, unit, options); });
        if (failure.row >= 0) raise_row_failure(failure, name_row);
        return out;
      },
      "p"_a, "bits"_a, "tolerance"_a, "renormalize"_a, "name_row"_a);
  using divergence = double (*)(const float*, const float*, std::int64_t, const distribution_options&);
  const std::pair<const char*, divergence> divergences[] = {
      {"_kl_rows", static_cast<divergence>(&kl_divergence)}, {"_js_rows", static_cast<divergence>(&js_divergence)}};
  for (const auto& [name, function] : divergences)
    m.def(
        name,
        [function = function](const rows_f& p, const rows_f& q, double tolerance, bool renormalize,
                              const py::object& name_row) {
          return pair_rows(p, q, tolerance, renormalize, name_row, function);
        },
        "p"_a, "q"_a, "tolerance"_a, "renormalize"_a, "name_row"_a);
}

}  // namespace ropex::python
