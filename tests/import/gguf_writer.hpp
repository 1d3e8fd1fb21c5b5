// A minimal GGUF v2/v3 writer for the tests: little-endian, values laid out as in ggml's
// gguf.cpp (u64 string lengths, u32 value types, u64 array counts). Only what the tests need.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <ropex/types.hpp>

namespace ropex_test {

class gguf_writer {
 public:
  explicit gguf_writer(std::uint32_t version = 3) : version_(version) {}

  // Scalars; type codes are gguf_type.
  gguf_writer& u8(const std::string& k, std::uint8_t v) { return scalar(k, 0, v, 1); }
  gguf_writer& i8(const std::string& k, std::int8_t v) { return scalar(k, 1, static_cast<std::uint8_t>(v), 1); }
  gguf_writer& u16(const std::string& k, std::uint16_t v) { return scalar(k, 2, v, 2); }
  gguf_writer& i16(const std::string& k, std::int16_t v) { return scalar(k, 3, static_cast<std::uint16_t>(v), 2); }
  gguf_writer& u32(const std::string& k, std::uint32_t v) { return scalar(k, 4, v, 4); }
  gguf_writer& i32(const std::string& k, std::int32_t v) { return scalar(k, 5, static_cast<std::uint32_t>(v), 4); }
  gguf_writer& f32(const std::string& k, float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return scalar(k, 6, bits, 4);
  }
  gguf_writer& boolean(const std::string& k, bool v) { return scalar(k, 7, v ? 1u : 0u, 1); }
  gguf_writer& str(const std::string& k, const std::string& v) {
    key(k, 8);
    string(kv_, v);
    ++kv_count_;
    return *this;
  }
  gguf_writer& u64(const std::string& k, std::uint64_t v) { return scalar(k, 10, v, 8); }
  gguf_writer& i64(const std::string& k, std::int64_t v) { return scalar(k, 11, static_cast<std::uint64_t>(v), 8); }
  gguf_writer& f64(const std::string& k, double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    return scalar(k, 12, bits, 8);
  }
  gguf_writer& u32_array(const std::string& k, const std::vector<std::uint32_t>& v) {
    key(k, 9);
    le(kv_, 4, 4);
    le(kv_, v.size(), 8);
    for (std::uint32_t x : v) le(kv_, x, 4);
    ++kv_count_;
    return *this;
  }
  gguf_writer& bool_array(const std::string& k, const std::vector<bool>& v) {
    key(k, 9);
    le(kv_, 7, 4);
    le(kv_, v.size(), 8);
    for (bool x : v) le(kv_, x ? 1 : 0, 1);
    ++kv_count_;
    return *this;
  }
  gguf_writer& str_array(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9);
    le(kv_, 8, 4);
    le(kv_, v.size(), 8);
    for (const std::string& s : v) string(kv_, s);
    ++kv_count_;
    return *this;
  }
  // [[1, 2], [3]] as an array of arrays of int32.
  gguf_writer& nested_i32(const std::string& k, const std::vector<std::vector<std::int32_t>>& v) {
    key(k, 9);
    le(kv_, 9, 4);
    le(kv_, v.size(), 8);
    for (const auto& inner : v) {
      le(kv_, 5, 4);
      le(kv_, inner.size(), 8);
      for (std::int32_t x : inner) le(kv_, static_cast<std::uint32_t>(x), 4);
    }
    ++kv_count_;
    return *this;
  }
  // A tensor-info record (name, dims, ggml type, offset); no data is written.
  gguf_writer& tensor(const std::string& name, const std::vector<std::uint64_t>& dims) {
    string(tensors_, name);
    le(tensors_, dims.size(), 4);
    for (std::uint64_t d : dims) le(tensors_, d, 8);
    le(tensors_, 0, 4);  // GGML_TYPE_F32
    le(tensors_, 0, 8);
    ++tensor_count_;
    return *this;
  }

  // A 1-D tensor with its data: F32 (ggml type 0) or F16 (type 1), at the next 32-byte aligned
  // offset of the data section (ggml's default general.alignment).
  gguf_writer& tensor_data(const std::string& name, const std::vector<float>& values, bool f16 = false) {
    while (data_.size() % 32 != 0) data_.push_back(0);
    string(tensors_, name);
    le(tensors_, 1, 4);
    le(tensors_, values.size(), 8);
    le(tensors_, f16 ? 1 : 0, 4);
    le(tensors_, data_.size(), 8);
    for (float v : values) {
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if (f16) le(data_, ropex::detail::float_to_half_bits(v), 2);
      else le(data_, bits, 4);
    }
    ++tensor_count_;
    return *this;
  }

  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> out{'G', 'G', 'U', 'F'};
    le(out, version_, 4);
    le(out, tensor_count_, 8);
    le(out, kv_count_, 8);
    out.insert(out.end(), kv_.begin(), kv_.end());
    out.insert(out.end(), tensors_.begin(), tensors_.end());
    if (!data_.empty()) {
      while (out.size() % 32 != 0) out.push_back(0);
      out.insert(out.end(), data_.begin(), data_.end());
    }
    return out;
  }

  static void le(std::vector<unsigned char>& out, std::uint64_t v, unsigned bytes) {
    for (unsigned i = 0; i < bytes; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  static void string(std::vector<unsigned char>& out, const std::string& s) {
    le(out, s.size(), 8);
    out.insert(out.end(), s.begin(), s.end());
  }

 private:
  void key(const std::string& k, std::uint32_t type) {
    string(kv_, k);
    le(kv_, type, 4);
  }
  gguf_writer& scalar(const std::string& k, std::uint32_t type, std::uint64_t bits, unsigned bytes) {
    key(k, type);
    le(kv_, bits, bytes);
    ++kv_count_;
    return *this;
  }

  std::uint32_t version_;
  std::uint64_t kv_count_ = 0, tensor_count_ = 0;
  std::vector<unsigned char> kv_, tensors_, data_;
};

}  // namespace ropex_test
