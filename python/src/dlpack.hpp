// The DLPack C ABI (dmlc/dlpack, versions 0.5-0.8, the "dltensor" capsule of the Python array API
// standard). Only the structs a consumer reads are declared; their layout is frozen by the spec,
// so the extension needs no DLPack headers from the system.
#pragma once

#include <cstdint>

namespace ropex::python::dlpack {

enum device_type : std::int32_t { cpu = 1, cuda = 2, cuda_host = 3, opencl = 4, vulkan = 7, metal = 8, rocm = 10 };
enum type_code : std::uint8_t { int_code = 0, uint_code = 1, float_code = 2, opaque_handle = 3, bfloat_code = 4, complex_code = 5 };

struct device {
  std::int32_t type;
  std::int32_t id;
};

struct data_type {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct tensor {
  void* data;
  dlpack::device device;
  std::int32_t ndim;
  data_type dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null means compact row-major
  std::uint64_t byte_offset;
};

struct managed_tensor {
  tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(managed_tensor*);
};

// The capsule name of an unconsumed tensor. A consumer that only borrows the memory leaves the
// name alone: the producer's capsule destructor then calls the deleter when the capsule dies.
inline constexpr const char* capsule_name = "dltensor";

}  // namespace ropex::python::dlpack
