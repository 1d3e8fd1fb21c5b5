#include "arguments.hpp"

#include <climits>

#include "bindings.hpp"

namespace ropex::python {

namespace {

std::string type_of(py::handle v) { return Py_TYPE(v.ptr())->tp_name; }

[[noreturn]] void wrong_type(py::handle value, const char* name, const char* wanted) {
  raise(PyExc_TypeError, std::string(name) + " must be " + wanted + " (got " + type_of(value) + ")");
}

bool is_numpy_bool(py::handle v) { return type_of(v) == "numpy.bool_" || type_of(v) == "numpy.bool"; }

}  // namespace

std::int64_t read_int64(py::handle value, const char* name) {
  if (!PyIndex_Check(value.ptr())) wrong_type(value, name, "an int");
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0)
    raise(PyExc_ValueError, std::string(name) + " must fit in int64 (got " + std::string(py::str(index)) + ")");
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<std::int64_t>(v);
}

int read_int(py::handle value, const char* name) {
  const std::int64_t v = read_int64(value, name);
  if (v < INT_MIN || v > INT_MAX)
    raise(PyExc_ValueError, std::string(name) + " must fit in a C int (got " + std::to_string(v) + ")");
  return static_cast<int>(v);
}

double read_float(py::handle value, const char* name) {
  PyObject* v = value.ptr();
  if (PyFloat_Check(v)) return PyFloat_AS_DOUBLE(v);
  const PyNumberMethods* number = Py_TYPE(v)->tp_as_number;
  if (number == nullptr || (number->nb_float == nullptr && number->nb_index == nullptr))
    wrong_type(value, name, "a number");
  const double d = PyFloat_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      raise(PyExc_ValueError, std::string(name) + " is too large for a float");
    }
    PyErr_Clear();
    wrong_type(value, name, "a number");
  }
  return d;
}

bool read_bool(py::handle value, const char* name) {
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True;
  if (is_numpy_bool(value)) return PyObject_IsTrue(value.ptr()) == 1;
  if (PyIndex_Check(value.ptr())) return read_int64(value, name) != 0;  // 0 and 1 as flags
  wrong_type(value, name, "a bool");
}

std::string read_str(py::handle value, const char* name) {
  if (!PyUnicode_Check(value.ptr())) wrong_type(value, name, "a str");
  return value.cast<std::string>();
}

std::vector<double> read_float_list(py::handle value, const char* name) {
  if (PyUnicode_Check(value.ptr()) || PyBytes_Check(value.ptr()) || !py::isinstance<py::iterable>(value))
    wrong_type(value, name, "a sequence of numbers");
  std::vector<double> out;
  for (py::handle item : value) {
    const std::string item_name = std::string(name) + "[" + std::to_string(out.size()) + "]";
    out.push_back(read_float(item, item_name.c_str()));
  }
  return out;
}

}  // namespace ropex::python
