#include "arrays.hpp"

#include <cstdint>
#include <cstring>

#include "bindings.hpp"
#include "dlpack.hpp"

namespace ropex::python {

namespace {

// Buffer-protocol format -> element type. A byte-order prefix is fine when it means native
// little-endian order (every platform ropex's x86 and aarch64 kernels run on).
dtype from_format(const char* format, Py_ssize_t itemsize) {
  if (format == nullptr) return dtype::other;  // unsigned bytes ("B") are implied
  if (*format == '@' || *format == '=' || *format == '<') ++format;
  if (format[0] == '\0' || format[1] != '\0') return dtype::other;
  switch (format[0]) {
    case 'f': return itemsize == 4 ? dtype::float32 : dtype::other;
    case 'e': return itemsize == 2 ? dtype::float16 : dtype::other;
    case 'l':
    case 'q': return itemsize == 8 ? dtype::int64 : dtype::other;
    default: return dtype::other;
  }
}

dtype from_dlpack_type(const dlpack::data_type& t) {
  if (t.lanes != 1) return dtype::other;
  if (t.code == dlpack::float_code && t.bits == 32) return dtype::float32;
  if (t.code == dlpack::float_code && t.bits == 16) return dtype::float16;
  if (t.code == dlpack::bfloat_code && t.bits == 16) return dtype::bfloat16;
  if (t.code == dlpack::int_code && t.bits == 64) return dtype::int64;
  return dtype::other;
}

std::string dlpack_type_name(const dlpack::data_type& t) {
  static const char* const codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string name = t.code < 7 ? codes[t.code] : "type" + std::to_string(t.code);
  name += std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

std::string device_name(const dlpack::device& d) {
  switch (d.type) {
    case dlpack::cuda: return "cuda:" + std::to_string(d.id);
    case dlpack::cuda_host: return "cuda_host";
    case dlpack::opencl: return "opencl:" + std::to_string(d.id);
    case dlpack::vulkan: return "vulkan:" + std::to_string(d.id);
    case dlpack::metal: return "mps:" + std::to_string(d.id);
    case dlpack::rocm: return "rocm:" + std::to_string(d.id);
    default: return "device type " + std::to_string(d.type);
  }
}

std::string python_type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

// PyTorch CPU tensors, read without DLPack. torch.to_dlpack allocates a managed tensor and a
// capsule that the call then frees again: about half of a decode-sized call. An exact
// torch.Tensor (no subclass) that is on the CPU, strided and of a type ropex takes is instead read
// through its attributes (dtype, shape, stride(), data_ptr()), and its storage object is held for
// the call, as a DLPack capsule would hold it, so that the memory outlives the GIL-free kernel
// even if another thread resizes the tensor meanwhile. Anything else, and any attribute that
// fails, goes through DLPack, which also words the errors.
//
// When DLPack is used, torch.to_dlpack is called directly: torch.Tensor.__dlpack__ is Python
// code whose checks reduce here to requires_grad (conjugate tensors are complex, sparse ones fail
// in to_dlpack).
//
// Everything is looked up once, after the user imported torch (ropex never imports it), and kept
// for the life of the process (no destructor runs after Python exits).
struct torch_fast_path {
  PyObject* tensor_type = nullptr;
  PyObject* to_dlpack = nullptr;
  // The attribute path; attributes_ok is false when this PyTorch lacks one of them.
  bool attributes_ok = false;
  PyObject* strided = nullptr;
  PyObject* float32 = nullptr;
  PyObject* float16 = nullptr;
  PyObject* bfloat16 = nullptr;
  PyObject* int64 = nullptr;
  PyObject* storage_method = nullptr;  // "untyped_storage" (PyTorch 2), "_storage" (1.x)
};

// The attribute and method names, interned once.
struct torch_names {
  PyObject* is_cpu = PyUnicode_InternFromString("is_cpu");
  PyObject* layout = PyUnicode_InternFromString("layout");
  PyObject* dtype = PyUnicode_InternFromString("dtype");
  PyObject* shape = PyUnicode_InternFromString("shape");
  PyObject* stride = PyUnicode_InternFromString("stride");
  PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
};

const torch_names& names() {
  static const torch_names n;
  return n;
}

void resolve_attributes(PyObject* torch, torch_fast_path& path) {
  path.strided = PyObject_GetAttrString(torch, "strided");
  path.float32 = PyObject_GetAttrString(torch, "float32");
  path.float16 = PyObject_GetAttrString(torch, "float16");
  path.bfloat16 = PyObject_GetAttrString(torch, "bfloat16");
  path.int64 = PyObject_GetAttrString(torch, "int64");
  for (const char* method : {"untyped_storage", "_storage"})
    if (PyObject_HasAttrString(path.tensor_type, method)) {
      path.storage_method = PyUnicode_InternFromString(method);
      break;
    }
  PyErr_Clear();
  path.attributes_ok = path.strided && path.float32 && path.float16 && path.bfloat16 && path.int64 &&
                       path.storage_method;
}

const torch_fast_path& torch_path() {
  static torch_fast_path path;
  if (path.tensor_type == nullptr) {
    // Only once torch is imported by the user: ropex never imports it itself.
    PyObject* modules = PyImport_GetModuleDict();
    PyObject* torch = PyDict_GetItemString(modules, "torch");
    if (torch != nullptr) {
      PyObject* type = PyObject_GetAttrString(torch, "Tensor");
      PyObject* to_dlpack = PyObject_GetAttrString(torch, "to_dlpack");
      if (to_dlpack == nullptr) {  // before PyTorch 1.10 it lived only in torch.utils.dlpack
        PyErr_Clear();
        PyObject* utils = PyImport_ImportModule("torch.utils.dlpack");
        to_dlpack = utils ? PyObject_GetAttrString(utils, "to_dlpack") : nullptr;
        Py_XDECREF(utils);
      }
      if (type != nullptr && to_dlpack != nullptr && PyType_Check(type)) {
        path.tensor_type = type;
        path.to_dlpack = to_dlpack;
        resolve_attributes(torch, path);
      } else {
        Py_XDECREF(type);
        Py_XDECREF(to_dlpack);
        PyErr_Clear();
      }
    }
  }
  return path;
}

bool is_torch_tensor(py::handle source) {
  const torch_fast_path& torch = torch_path();
  return torch.tensor_type != nullptr && Py_TYPE(source.ptr()) == reinterpret_cast<PyTypeObject*>(torch.tensor_type);
}

py::object attribute(py::handle source, PyObject* name) {
  return py::reinterpret_steal<py::object>(PyObject_GetAttr(source.ptr(), name));
}

py::object call_method(py::handle source, PyObject* name) {
#if PY_VERSION_HEX >= 0x03090000
  return py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(source.ptr(), name));
#else
  return py::reinterpret_steal<py::object>(PyObject_CallMethodObjArgs(source.ptr(), name, nullptr));
#endif
}

// A tuple of ints (torch.Size, the tuple of stride()) into `out`; false when it is not one.
bool read_ints(const py::object& tuple, int ndim, std::array<std::int64_t, max_dims>& out) {
  if (!tuple || !PyTuple_Check(tuple.ptr()) || PyTuple_GET_SIZE(tuple.ptr()) != ndim) return false;
  for (int i = 0; i < ndim; ++i) {
    const long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple.ptr(), i));
    if (v == -1 && PyErr_Occurred()) return false;
    out[static_cast<std::size_t>(i)] = v;
  }
  return true;
}

bool requires_grad(py::handle source) {
  static PyObject* const attribute = PyUnicode_InternFromString("requires_grad");
  PyObject* value = PyObject_GetAttr(source.ptr(), attribute);
  if (value == nullptr) {
    PyErr_Clear();
    return false;
  }
  const int truth = PyObject_IsTrue(value);
  Py_DECREF(value);
  if (truth < 0) PyErr_Clear();
  return truth > 0;
}

// Where `source` lives when it says so and that is not the CPU ("meta", "cuda:0"); empty otherwise.
// Asked only after an export failed: DLPack's own query first, then a `device` attribute (PyTorch's
// meta device has no DLPack device code, so only the attribute names it).
std::string foreign_device(py::handle source) {
  try {
    if (py::hasattr(source, "__dlpack_device__")) {
      const py::tuple where = source.attr("__dlpack_device__")();
      const dlpack::device d{where[0].cast<std::int32_t>(), where[1].cast<std::int32_t>()};
      return d.type == dlpack::cpu ? std::string() : device_name(d);
    }
  } catch (py::error_already_set&) {
  } catch (py::cast_error&) {
  }
  try {
    if (py::hasattr(source, "device")) {
      const std::string where = py::str(source.attr("device"));
      return where == "cpu" ? std::string() : where;
    }
  } catch (py::error_already_set&) {
  }
  return std::string();
}

// The error of an export that failed: off the CPU, or the producer's own reason.
[[noreturn]] void raise_export_failure(py::handle source, const char* name, const py::error_already_set& e) {
  const std::string device = foreign_device(source);
  if (!device.empty()) raise(PyExc_ValueError, std::string(name) + " must be on the CPU (got " + device + ")");
  // The exception's type and text, not what(), which appends the Python traceback.
  const std::string reason = std::string(py::str(e.type().attr("__name__"))) + ": " + std::string(py::str(e.value()));
  raise(PyExc_ValueError, std::string(name) + " cannot be exported through DLPack: " + reason);
}

[[noreturn]] void raise_requires_grad(const char* name) {
  raise(PyExc_ValueError, std::string(name) + " requires grad: ropex rotates in place, outside autograd; pass " +
                              name + ".detach() (the same memory) or compute it under torch.no_grad()");
}

// The capsule of a DLPack producer (the protocol's __dlpack__, or torch.to_dlpack for a
// torch.Tensor); a null object when `source` is no producer.
py::object dlpack_capsule(py::handle source, const char* name, bool written) {
  if (is_torch_tensor(source)) {
    const torch_fast_path& torch = torch_path();
    if (written && requires_grad(source)) raise_requires_grad(name);
#if PY_VERSION_HEX >= 0x03090000
    PyObject* capsule = PyObject_CallOneArg(torch.to_dlpack, source.ptr());
#else
    PyObject* capsule = PyObject_CallFunctionObjArgs(torch.to_dlpack, source.ptr(), nullptr);
#endif
    if (capsule == nullptr) raise_export_failure(source, name, py::error_already_set());
    return py::reinterpret_steal<py::object>(capsule);
  }
  if (!py::hasattr(source, "__dlpack__")) return py::object();
  try {
    return source.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    // PyTorch refuses to export a tensor that requires grad; rotating it in place behind autograd's
    // back would corrupt the gradient, so say what to do instead.
    if (requires_grad(source)) raise_requires_grad(name);
    raise_export_failure(source, name, e);
  }
}

}  // namespace

void raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

std::int64_t borrowed_array::size() const {
  std::int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[static_cast<std::size_t>(i)];
  return n;
}

bool borrowed_array::c_contiguous() const {
  std::int64_t expected = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    const auto d = static_cast<std::size_t>(i);
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::string borrowed_array::type_name(py::handle source) const {
  switch (type) {
    case dtype::float32: return "float32";
    case dtype::float16: return "float16";
    case dtype::bfloat16: return "bfloat16";
    case dtype::int64: return "int64";
    case dtype::other: break;
  }
  if (from_dlpack) return dlpack_type_;
  // NumPy and friends name their dtype better than a format string does.
  if (py::hasattr(source, "dtype")) return py::str(source.attr("dtype"));
  return std::string("buffer format '") + (buffer_.format ? buffer_.format : "B") + "'";
}

void borrowed_array::release() {
  if (has_buffer_) PyBuffer_Release(&buffer_);
  has_buffer_ = false;
  owner_ = py::object();  // for a capsule, the producer's destructor calls the DLPack deleter
}

bool borrowed_array::borrow_torch(py::handle source, const char* name, bool written, bool copied_at_once) {
  const torch_fast_path& torch = torch_path();
  if (!torch.attributes_ok) return false;
  const torch_names& n = names();
  const bool read = [&] {
    const py::object cpu = attribute(source, n.is_cpu), layout = attribute(source, n.layout),
                     element = attribute(source, n.dtype);
    if (cpu.ptr() != Py_True) return false;  // DLPack names the device in the error
    if (layout.ptr() != torch.strided)
      raise(PyExc_ValueError, std::string(name) + " must be a dense (strided) tensor (got " +
                                  std::string(py::str(layout)) + ")");
    const PyObject* d = element.ptr();
    type = d == torch.float32    ? dtype::float32
           : d == torch.float16  ? dtype::float16
           : d == torch.bfloat16 ? dtype::bfloat16
           : d == torch.int64    ? dtype::int64
                                 : dtype::other;
    if (type == dtype::other) return false;  // DLPack names the type in the error
    itemsize = type == dtype::float32 ? 4 : type == dtype::int64 ? 8 : 2;
    if (written && requires_grad(source)) raise_requires_grad(name);
    const py::object size = attribute(source, n.shape);
    if (!size || !PyTuple_Check(size.ptr())) return false;
    const Py_ssize_t dims = PyTuple_GET_SIZE(size.ptr());
    if (dims > max_dims) return false;  // DLPack words that error
    ndim = static_cast<int>(dims);
    if (!read_ints(size, ndim, shape) || !read_ints(call_method(source, n.stride), ndim, strides)) return false;
    const py::object pointer = call_method(source, n.data_ptr);
    if (!pointer) return false;
    data = PyLong_AsVoidPtr(pointer.ptr());
    if (data == nullptr && PyErr_Occurred()) return false;
    if (copied_at_once) return true;
    owner_ = call_method(source, torch.storage_method);
    return static_cast<bool>(owner_);
  }();
  if (!read) {
    PyErr_Clear();
    owner_ = py::object();
    return false;
  }
  writable = true;
  from_dlpack = true;  // the same kind of object as a DLPack export
  return true;
}

bool borrowed_array::borrow(py::handle source, const char* name, bool written, bool copied_at_once) {
  release();
  if (is_torch_tensor(source) && borrow_torch(source, name, written, copied_at_once)) return true;
  if (PyObject_CheckBuffer(source.ptr())) {
    // Read-only requests succeed for read-only arrays too, so writability is reported by name
    // instead of as the exporter's BufferError.
    if (PyObject_GetBuffer(source.ptr(), &buffer_, PyBUF_RECORDS_RO) != 0) throw py::error_already_set();
    has_buffer_ = true;
    from_dlpack = false;
    if (buffer_.ndim > max_dims)
      raise(PyExc_ValueError, std::string(name) + " has " + std::to_string(buffer_.ndim) +
                                  " dimensions; ropex takes at most " + std::to_string(max_dims));
    if (buffer_.itemsize <= 0) raise(PyExc_TypeError, std::string(name) + " has elements of size 0");
    ndim = buffer_.ndim;
    itemsize = static_cast<int>(buffer_.itemsize);
    type = from_format(buffer_.format, buffer_.itemsize);
    data = buffer_.buf;
    writable = !buffer_.readonly;
    for (int i = 0; i < ndim; ++i) {
      const auto d = static_cast<std::size_t>(i);
      shape[d] = buffer_.shape[i];
      const Py_ssize_t bytes = buffer_.strides ? buffer_.strides[i] : 0;
      if (bytes % buffer_.itemsize != 0)
        raise(PyExc_ValueError, std::string(name) + " has a stride of " + std::to_string(bytes) +
                                    " bytes in dimension " + std::to_string(i) +
                                    ", not a multiple of its element size");
      strides[d] = bytes / buffer_.itemsize;
    }
    if (buffer_.strides == nullptr) {  // a C-contiguous exporter may omit strides
      std::int64_t s = 1;
      for (int i = ndim - 1; i >= 0; --i) {
        strides[static_cast<std::size_t>(i)] = s;
        s *= shape[static_cast<std::size_t>(i)];
      }
    }
    return true;
  }

  py::object capsule = dlpack_capsule(source, name, written);
  if (!capsule) return false;
  auto* managed = static_cast<dlpack::managed_tensor*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::capsule_name));
  if (managed == nullptr) {
    PyErr_Clear();
    raise(PyExc_TypeError, std::string(name) + ".__dlpack__() did not return a \"dltensor\" capsule");
  }
  owner_ = std::move(capsule);
  from_dlpack = true;
  const dlpack::tensor& t = managed->dl_tensor;
  if (t.device.type != dlpack::cpu)
    raise(PyExc_ValueError, std::string(name) + " must be on the CPU (got " + device_name(t.device) + ")");
  if (t.ndim > max_dims)
    raise(PyExc_ValueError, std::string(name) + " has " + std::to_string(t.ndim) +
                                " dimensions; ropex takes at most " + std::to_string(max_dims));
  ndim = t.ndim;
  type = from_dlpack_type(t.dtype);
  if (type == dtype::other) dlpack_type_ = dlpack_type_name(t.dtype);
  itemsize = (t.dtype.bits * t.dtype.lanes + 7) / 8;
  data = static_cast<char*>(t.data) + t.byte_offset;
  writable = true;  // DLPack before 1.0 has no read-only flag
  std::int64_t s = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    const auto d = static_cast<std::size_t>(i);
    shape[d] = t.shape[i];
    strides[d] = t.strides ? t.strides[i] : s;
    s *= shape[d];
  }
  return true;
}

void borrow_floating(py::handle source, const char* name, borrowed_array& out) {
  if (!out.borrow(source, name, true))
    raise(PyExc_TypeError, std::string(name) +
                               " must be a NumPy array or a tensor with __dlpack__ (PyTorch), got " +
                               python_type_name(source));
  if (out.type != dtype::float32 && out.type != dtype::float16 && out.type != dtype::bfloat16)
    raise(PyExc_TypeError,
          std::string(name) + " must hold float32, float16 or bfloat16 (got " + out.type_name(source) + ")");
  if (reinterpret_cast<std::uintptr_t>(out.data) % static_cast<std::uintptr_t>(out.itemsize) != 0)
    raise(PyExc_ValueError, std::string(name) + " is not aligned to its element size");
}

positions_ref::positions_ref(py::handle source, const char* name) {
  // A Python int or a short list of ints (decode) is read without NumPy.
  if (PyLong_CheckExact(source.ptr()) || ((PyList_CheckExact(source.ptr()) || PyTuple_CheckExact(source.ptr())) &&
                                          PySequence_Fast_GET_SIZE(source.ptr()) <= static_cast<Py_ssize_t>(small_capacity))) {
    const bool single = PyLong_CheckExact(source.ptr());
    const Py_ssize_t n = single ? 1 : PySequence_Fast_GET_SIZE(source.ptr());
    bool all_ints = true;
    for (Py_ssize_t i = 0; i < n && all_ints; ++i) {
      PyObject* item = single ? source.ptr() : PySequence_Fast_GET_ITEM(source.ptr(), i);
      all_ints = PyLong_CheckExact(item);
      if (!all_ints) break;
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
      if (overflow != 0)
        raise(PyExc_ValueError, std::string(name) + " holds an integer outside int64");
      small_[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(v);
    }
    if (all_ints) {
      data_ = small_.data();
      size_ = n;
      ndim_ = single ? 0 : 1;
      return;
    }
  }
  if (array_.borrow(source, name, false, true) && array_.type == dtype::int64 && array_.c_contiguous() &&
      reinterpret_cast<std::uintptr_t>(array_.data) % 8 == 0) {
    size_ = array_.size();
    ndim_ = array_.ndim;
    if (!array_.held() && size_ <= static_cast<std::int64_t>(small_capacity)) {
      // A decode-sized tensor: copied now, so its storage need not be held through the kernel.
      std::memcpy(small_.data(), array_.data, static_cast<std::size_t>(size_) * sizeof(std::int64_t));
      data_ = small_.data();
      return;
    }
    if (array_.held() || array_.borrow(source, name, false)) {  // read in place: hold the memory
      data_ = static_cast<const std::int64_t*>(array_.data);
      return;
    }
  }
  // Anything else: one conversion through NumPy, accepting integer element types only (a float
  // position would be truncated silently).
  const py::module_ numpy = py::module_::import("numpy");
  py::object array;
  try {
    array = numpy.attr("asarray")(source);
  } catch (py::error_already_set& e) {
    raise(PyExc_TypeError, std::string(name) + " must be an integer array, sequence or int: " + e.what());
  }
  const std::string kind = py::str(array.attr("dtype").attr("kind"));
  if (kind != "i" && kind != "u")
    raise(PyExc_TypeError, std::string(name) + " must hold integers (got " +
                               std::string(py::str(array.attr("dtype"))) + ")");
  // uint64 values of 2^63 and above would wrap to negative positions in the cast below.
  if (kind == "u" && py::int_(array.attr("size")).cast<std::int64_t>() > 0 &&
      py::int_(array.attr("max")()).cast<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    raise(PyExc_ValueError, std::string(name) + " holds an integer outside int64");
  converted_ = numpy.attr("ascontiguousarray")(array, numpy.attr("int64"));
  array_.borrow(converted_, name, false);
  data_ = static_cast<const std::int64_t*>(array_.data);
  size_ = array_.size();
  ndim_ = array_.ndim;
}

}  // namespace ropex::python
