// Scalar and list arguments converted by hand, so that a wrong type raises a TypeError naming the
// argument. pybind11's own conversion fails with "incompatible function arguments" and prints
// every argument of the call, a whole tensor included, without saying which one is wrong.
//
// A parameter declared `loose<T>` accepts any object (pybind11 shows it as T in the signature and
// the docstring); the function body reads it with `.get("name")`:
//   [](loose<double> factor) { return linear{factor.get("factor")}; }
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ropex::python {

namespace py = pybind11;

// The readers. int-like: int and objects with __index__ (NumPy integers), never a float (a
// truncated 1.5 would be a silent error). Numbers: int, float and objects with __float__ (NumPy
// and 0-d tensor scalars). bool: True / False, NumPy's bool and int-likes. str: str only.
std::int64_t read_int64(py::handle value, const char* name);
int read_int(py::handle value, const char* name);
double read_float(py::handle value, const char* name);
bool read_bool(py::handle value, const char* name);
std::string read_str(py::handle value, const char* name);
std::vector<double> read_float_list(py::handle value, const char* name);

template <class T>
T read(py::handle value, const char* name);
template <>
inline std::int64_t read<std::int64_t>(py::handle v, const char* name) { return read_int64(v, name); }
template <>
inline int read<int>(py::handle v, const char* name) { return read_int(v, name); }
template <>
inline double read<double>(py::handle v, const char* name) { return read_float(v, name); }
template <>
inline bool read<bool>(py::handle v, const char* name) { return read_bool(v, name); }
template <>
inline std::string read<std::string>(py::handle v, const char* name) { return read_str(v, name); }
template <>
inline std::vector<double> read<std::vector<double>>(py::handle v, const char* name) { return read_float_list(v, name); }

template <class T>
struct loose {
  py::object object;
  T get(const char* name) const { return read<T>(object, name); }
};

// None is "not given".
template <class T>
struct loose<std::optional<T>> {
  py::object object;
  std::optional<T> get(const char* name) const {
    if (object.is_none()) return std::nullopt;
    return read<T>(object, name);
  }
};

}  // namespace ropex::python

namespace pybind11::detail {

template <class T>
struct type_caster<ropex::python::loose<T>> {
  PYBIND11_TYPE_CASTER(ropex::python::loose<T>, make_caster<T>::name);
  bool load(handle source, bool) {
    value.object = reinterpret_borrow<object>(source);
    return true;
  }
  static handle cast(const ropex::python::loose<T>& v, return_value_policy, handle) { return v.object.inc_ref(); }
};

}  // namespace pybind11::detail
