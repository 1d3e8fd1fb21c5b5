// Borrowing Python arrays without a copy: the buffer protocol (NumPy and anything else that exports
// a strided buffer), PyTorch CPU tensors through their attributes, and DLPack (`__dlpack__`:
// PyTorch's other tensors, JAX, CuPy, ...). A borrowed array keeps the producer's buffer, capsule
// or storage alive until it is destroyed, so the memory stays valid while the GIL is released
// around a kernel.
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
  // The first ndim entries are set by borrow(); the rest stay uninitialised (not cleared on every call).
  std::array<std::int64_t, max_dims> shape, strides;  // strides in elements
  bool writable = true;
  bool from_dlpack = false;

  std::int64_t size() const;
  // Row-major contiguous (what positions are read as without a copy).
  bool c_contiguous() const;
  // The element type's name for messages ("float64", "int32", ...); only built on error paths.
  std::string type_name(py::handle source) const;

  // Fills *this from `source`; false when `source` offers neither protocol. Errors that concern
  // the object itself (a CUDA tensor, an unsupported layout; a tensor requiring grad when it is
  // to be `written`) raise a ValueError naming `name`. With `copied_at_once` the caller copies
  // the elements before it releases the GIL, so a PyTorch tensor's storage is not held (see
  // held()).
  bool borrow(py::handle source, const char* name, bool written, bool copied_at_once = false);
  // Whether the memory is kept alive by *this (a buffer, a capsule or a storage), so that it may
  // be used without the GIL.
  bool held() const { return has_buffer_ || static_cast<bool>(owner_); }

 private:
  // An exact torch.Tensor read through its attributes; false (nothing raised) when DLPack must do.
  bool borrow_torch(py::handle source, const char* name, bool written, bool copied_at_once);
  void release();
  bool has_buffer_ = false;
  Py_buffer buffer_{};
  py::object owner_;  // what keeps the memory alive: a DLPack capsule or a tensor's storage
  std::string dlpack_type_;
};

// `source` as a float32 / float16 / bfloat16 array: TypeError for another object or element type,
// ValueError for more than max_dims dimensions, a misaligned pointer or a stride that is not a
// whole number of elements.
void borrow_floating(py::handle source, const char* name, borrowed_array& out);

// Positions as contiguous int64: NumPy / DLPack int64 arrays are read in place, a Python int, a
// short list of ints or a short int64 tensor is copied to the stack; other integer arrays and
// sequences are converted once through NumPy (positions are small next to the tensor).
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
  std::array<std::int64_t, small_capacity> small_;  // the first size_ entries are set when used
  const std::int64_t* data_ = nullptr;
  std::int64_t size_ = 0;
  int ndim_ = 0;
};

}  // namespace ropex::python
