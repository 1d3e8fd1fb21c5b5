// Borrowing Python arrays without a copy: the buffer protocol (NumPy and anything else that exports
// a strided buffer) and DLPack (`__dlpack__`: PyTorch, JAX, CuPy, ...). A borrowed array keeps the
// producer's buffer or capsule alive until it is destroyed, so the memory stays valid while the
// GIL is released around a kernel.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <pybind11/pybind11.h>

namespace ropex::python {

namespace py = pybind11;

enum class dtype { float32, float16, bfloat16, int64, other };

inline constexpr int max_dims = 16;

class borrowed_array {
 public:
  borrowed_array() = default;
  borrowed_array(const borrowed_array&) = delete;
  borrowed_array& operator=(const borrowed_array&) = delete;
  ~borrowed_array() { release(); }

  void* data = nullptr;
  python::dtype type = dtype::other;
  int itemsize = 0;
  int ndim = 0;
  std::array<std::int64_t, max_dims> shape{}, strides{};  // strides in elements
  bool writable = true;
  bool from_dlpack = false;

  std::int64_t size() const;
  // Row-major contiguous (what positions are read as without a copy).
  bool c_contiguous() const;
  // The element type's name for messages ("float64", "int32", ...); only built on error paths.
  std::string type_name(py::handle source) const;

  // Fills *this from `source`; false when `source` offers neither protocol. Errors that concern
  // the object itself (a CUDA tensor, an unsupported layout; a tensor requiring grad when it is
  // to be `written`) raise a ValueError naming `name`.
  bool borrow(py::handle source, const char* name, bool written);

 private:
  void release();
  bool has_buffer_ = false;
  Py_buffer buffer_{};
  py::object capsule_;
  std::string dlpack_type_;
};

// `source` as a float32 / float16 / bfloat16 array: TypeError for another object or element type,
// ValueError for more than max_dims dimensions, a misaligned pointer or a stride that is not a
// whole number of elements.
void borrow_floating(py::handle source, const char* name, borrowed_array& out);

// Positions as contiguous int64: NumPy / DLPack int64 arrays are read in place, a Python int or a
// short list of ints is copied to the stack; other integer arrays and sequences are converted once
// through NumPy (positions are small next to the tensor).
class positions_ref {
 public:
  positions_ref(py::handle source, const char* name);
  const std::int64_t* data() const { return data_; }
  std::int64_t size() const { return size_; }
  int ndim() const { return ndim_; }

 private:
  static constexpr std::size_t small_capacity = 16;
  borrowed_array array_;
  py::object converted_;
  std::array<std::int64_t, small_capacity> small_{};
  const std::int64_t* data_ = nullptr;
  std::int64_t size_ = 0;
  int ndim_ = 0;
};

}  // namespace ropex::python
