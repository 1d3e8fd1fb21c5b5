// safetensors reader (needs nlohmann/json; CMake target ropex::model).
//
// Format (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of UTF-8
// JSON, then the data buffer. The JSON maps each tensor name to
//   {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}
// with offsets relative to the start of the data buffer, plus an optional "__metadata__" object
// of strings. A sharded checkpoint adds model.safetensors.index.json, whose "weight_map" maps
// each tensor name to the shard file that holds it.
//
// Every size and offset is checked before a byte of data is touched: the header length against
// the file, each shape product against overflow, each byte range against the buffer and against
// the dtype size times the element count, and ranges against each other (no overlap). A corrupt
// file raises std::invalid_argument naming the file and the field ("tensor 'w'.data_offsets");
// an unreadable file raises std::runtime_error. Nothing here aborts or reads out of bounds.
//
// The data is memory-mapped read-only (POSIX mmap) where available, else read into a buffer;
// tensor data is read through memcpy, so unaligned offsets are fine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropex/config.hpp"  // detail::fail
#include "ropex/types.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define ROPEX_SAFETENSORS_MMAP 1
#endif

namespace ropex {

enum class tensor_dtype { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

// Bytes per element, and the name safetensors writes.
inline std::size_t dtype_size(tensor_dtype t) {
  switch (t) {
    case tensor_dtype::f64: case tensor_dtype::i64: return 8;
    case tensor_dtype::f32: case tensor_dtype::i32: return 4;
    case tensor_dtype::f16: case tensor_dtype::bf16: case tensor_dtype::i16: return 2;
    default: return 1;
  }
}

inline const char* dtype_name(tensor_dtype t) {
  static const char* const names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
  return names[static_cast<int>(t)];
}

struct tensor_info {
  std::string name;
  tensor_dtype dtype = tensor_dtype::f32;
  std::vector<std::int64_t> shape;
  std::int64_t elements = 1;
  const std::uint8_t* data = nullptr;  // inside the owning safetensors_file; may be unaligned
  std::size_t bytes = 0;
};

// How the data reaches memory.
enum class load_mode { map_or_read, read };

namespace detail::st {

// Largest header the reader accepts (the reference implementation's limit is 100 MB).
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

inline bool parse_dtype(const std::string& s, tensor_dtype& out) {
  static const std::pair<const char*, tensor_dtype> table[] = {
      {"F64", tensor_dtype::f64}, {"F32", tensor_dtype::f32}, {"F16", tensor_dtype::f16},
      {"BF16", tensor_dtype::bf16}, {"I64", tensor_dtype::i64}, {"I32", tensor_dtype::i32},
      {"I16", tensor_dtype::i16}, {"I8", tensor_dtype::i8}, {"U8", tensor_dtype::u8},
      {"BOOL", tensor_dtype::boolean}};
  for (const auto& [name, t] : table)
    if (s == name) {
      out = t;
      return true;
    }
  return false;
}

// A non-negative JSON integer that fits in uint64 (floats, negatives and strings are refused).
inline std::uint64_t as_size(const nlohmann::json& v, const std::string& field) {
  if (!v.is_number_unsigned()) {
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
    fail(field, "must be a non-negative integer");
  }
  return v.get<std::uint64_t>();
}

// Owns the bytes: an mmap region or a heap buffer.
class byte_source {
 public:
  byte_source() = default;
  byte_source(const byte_source&) = delete;
  byte_source& operator=(const byte_source&) = delete;
  ~byte_source() {
#ifdef ROPEX_SAFETENSORS_MMAP
    if (mapped_ != nullptr) ::munmap(mapped_, size_);
#endif
  }

  static std::unique_ptr<byte_source> from_bytes(std::vector<std::uint8_t> bytes) {
    auto s = std::make_unique<byte_source>();
    s->buffer_ = std::move(bytes);
    s->size_ = s->buffer_.size();
    return s;
  }

  static std::unique_ptr<byte_source> from_file(const std::filesystem::path& path, load_mode mode) {
#ifdef ROPEX_SAFETENSORS_MMAP
    if (mode == load_mode::map_or_read) {
      const int fd = ::open(path.c_str(), O_RDONLY);
      if (fd >= 0) {
        struct stat st {};
        if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
          void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
          if (p != MAP_FAILED) {
            ::close(fd);
            auto s = std::make_unique<byte_source>();
            s->mapped_ = p;
            s->size_ = static_cast<std::size_t>(st.st_size);
            return s;
          }
        }
        ::close(fd);
      }
      // Fall through: an empty file, a pipe or a filesystem without mmap is read instead.
    }
#else
    (void)mode;
#endif
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("ropex: " + path.string() + " cannot be opened");
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw std::runtime_error("ropex: " + path.string() + " could not be read");
    return from_bytes(std::move(bytes));
  }

  const std::uint8_t* data() const {
    return mapped_ != nullptr ? static_cast<const std::uint8_t*>(mapped_) : buffer_.data();
  }
  std::size_t size() const { return size_; }
  bool mapped() const { return mapped_ != nullptr; }

 private:
  void* mapped_ = nullptr;
  std::size_t size_ = 0;
  std::vector<std::uint8_t> buffer_;
};

}  // namespace detail::st

// One .safetensors file. Movable, not copyable; tensor_info pointers stay valid while it lives.
class safetensors_file {
 public:
  // `label` names the file in error messages.
  static safetensors_file open(const std::filesystem::path& path, load_mode mode = load_mode::map_or_read) {
    return safetensors_file(detail::st::byte_source::from_file(path, mode), path.string());
  }
  static safetensors_file from_bytes(std::vector<std::uint8_t> bytes, std::string label = "safetensors") {
    return safetensors_file(detail::st::byte_source::from_bytes(std::move(bytes)), std::move(label));
  }

  const std::vector<tensor_info>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool mapped() const { return source_->mapped(); }
  const std::string& label() const { return label_; }

  // nullptr when absent.
  const tensor_info* find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  const tensor_info& at(const std::string& name) const {
    if (const tensor_info* t = find(name)) return *t;
    detail::fail(label_, "has no tensor '" + name + "'");
  }

 private:
  safetensors_file(std::unique_ptr<detail::st::byte_source> source, std::string label)
      : source_(std::move(source)), label_(std::move(label)) {
    parse();
  }

  [[noreturn]] void bad(const std::string& field, const std::string& why) const { detail::fail(label_ + ": " + field, why); }

  void parse() {
    using nlohmann::json;
    const std::uint8_t* bytes = source_->data();
    const std::size_t size = source_->size();
    if (size < 8) bad("header length", "needs 8 bytes (file has " + std::to_string(size) + ")");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
    if (n > detail::st::max_header_bytes) bad("header length", "is " + std::to_string(n) + " (limit 100000000)");
    if (n > size - 8)
      bad("header length", "is " + std::to_string(n) + " but only " + std::to_string(size - 8) + " bytes follow");
    json header;
    try {
      header = json::parse(bytes + 8, bytes + 8 + n);
    } catch (const json::exception& e) {
      bad("header", std::string("is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) bad("header", "must be a JSON object");
    const std::uint8_t* data = bytes + 8 + n;
    const std::uint64_t data_size = size - 8 - n;

    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      if (name == "__metadata__") {
        if (!it->is_object()) bad("__metadata__", "must be an object");
        for (auto m = it->begin(); m != it->end(); ++m) {
          if (!m->is_string()) bad("__metadata__." + m.key(), "must be a string");
          metadata_[m.key()] = m->get<std::string>();
        }
        continue;
      }
      const std::string field = "tensor '" + name + "'";
      if (!it->is_object()) bad(field, "must be an object");
      tensor_info t;
      t.name = name;
      const auto dtype = it->find("dtype");
      if (dtype == it->end() || !dtype->is_string()) bad(field + ".dtype", "must be a string");
      if (!detail::st::parse_dtype(dtype->get<std::string>(), t.dtype))
        bad(field + ".dtype", "is not a known dtype ('" + dtype->get<std::string>() + "')");
      const auto shape = it->find("shape");
      if (shape == it->end() || !shape->is_array()) bad(field + ".shape", "must be an array");
      std::uint64_t elements = 1;
      for (std::size_t d = 0; d < shape->size(); ++d) {
        const std::string dim_field = field + ".shape[" + std::to_string(d) + "]";
        const std::uint64_t extent = detail::st::as_size((*shape)[d], dim_field);
        // Bounding the product by the data size keeps it far from overflow.
        if (extent > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          bad(dim_field, "is too large");
        if (extent != 0 && elements > data_size / extent + 1) bad(field + ".shape", "holds more elements than the file");
        elements *= extent;
        t.shape.push_back(static_cast<std::int64_t>(extent));
      }
      const auto offsets = it->find("data_offsets");
      if (offsets == it->end() || !offsets->is_array() || offsets->size() != 2)
        bad(field + ".data_offsets", "must be an array [begin, end]");
      const std::uint64_t begin = detail::st::as_size((*offsets)[0], field + ".data_offsets[0]");
      const std::uint64_t end = detail::st::as_size((*offsets)[1], field + ".data_offsets[1]");
      if (begin > end) bad(field + ".data_offsets", "has begin > end");
      if (end > data_size)
        bad(field + ".data_offsets", "end " + std::to_string(end) + " lies past the data (" + std::to_string(data_size) +
                                         " bytes)");
      const std::uint64_t width = dtype_size(t.dtype);
      const bool fits = elements <= std::numeric_limits<std::uint64_t>::max() / width;
      if (!fits || end - begin != elements * width)
        bad(field + ".data_offsets", "span " + std::to_string(end - begin) + " bytes, but shape x dtype needs " +
                                         (fits ? std::to_string(elements * width) : std::string("more than 2^64")));
      t.elements = static_cast<std::int64_t>(elements);
      t.data = data + begin;
      t.bytes = static_cast<std::size_t>(end - begin);
      ranges.emplace_back(begin, end);
      index_[name] = tensors_.size();
      tensors_.push_back(std::move(t));
    }
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t covered = 0;  // end of the furthest range so far
    for (const auto& [begin, end] : ranges) {
      if (begin == end) continue;  // empty tensors occupy nothing
      if (begin < covered) bad("data_offsets", "of two tensors overlap at byte " + std::to_string(begin));
      covered = end;
    }
  }

  std::unique_ptr<detail::st::byte_source> source_;
  std::string label_;
  std::vector<tensor_info> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Converts a floating tensor (F32, F16, BF16, F64) to float, `t.elements` values into `out`.
inline void tensor_to_float(const tensor_info& t, float* out) {
  const std::uint8_t* p = t.data;
  const std::size_t n = static_cast<std::size_t>(t.elements);
  switch (t.dtype) {
    case tensor_dtype::f32:
      if (n) std::memcpy(out, p, n * 4);
      return;
    case tensor_dtype::f64:
      for (std::size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return;
    case tensor_dtype::f16:
    case tensor_dtype::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = t.dtype == tensor_dtype::f16 ? detail::half_bits_to_float(b) : detail::bfloat16_bits_to_float(b);
      }
      return;
    default:
      detail::fail("tensor '" + t.name + "'.dtype", std::string("is ") + dtype_name(t.dtype) + ", not a float type");
  }
}

inline std::vector<float> tensor_to_float(const tensor_info& t) {
  std::vector<float> out(static_cast<std::size_t>(t.elements));
  tensor_to_float(t, out.data());
  return out;
}

// The tensors of a model directory: model.safetensors, or the shards a
// model.safetensors.index.json names (its "weight_map": tensor name -> file in the directory).
class safetensors_model {
 public:
  static safetensors_model open(const std::filesystem::path& dir, load_mode mode = load_mode::map_or_read) {
    safetensors_model m;
    const std::filesystem::path index = dir / "model.safetensors.index.json";
    if (std::filesystem::exists(index)) {
      std::ifstream in(index, std::ios::binary);
      if (!in) throw std::runtime_error("ropex: " + index.string() + " cannot be opened");
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception& e) {
        detail::fail(index.string(), std::string("is not valid JSON: ") + e.what());
      }
      const auto map = j.is_object() ? j.find("weight_map") : j.end();
      if (map == j.end() || !map->is_object()) detail::fail(index.string() + ": weight_map", "must be an object");
      std::map<std::string, std::size_t> shard_of_file;
      for (auto it = map->begin(); it != map->end(); ++it) {
        if (!it->is_string()) detail::fail(index.string() + ": weight_map." + it.key(), "must be a file name");
        const std::string file = it->get<std::string>();
        // Shards live beside the index: no directories, so the index cannot point elsewhere.
        if (file.empty() || file.find('/') != std::string::npos || file.find('\\') != std::string::npos || file == "..")
          detail::fail(index.string() + ": weight_map." + it.key(), "must name a file in the model directory");
        if (!shard_of_file.count(file)) {
          shard_of_file[file] = m.shards_.size();
          m.shards_.push_back(std::make_unique<safetensors_file>(safetensors_file::open(dir / file, mode)));
        }
        const tensor_info* t = m.shards_[shard_of_file[file]]->find(it.key());
        if (t == nullptr) detail::fail(index.string() + ": weight_map." + it.key(), "names " + file + ", which lacks it");
        m.by_name_[it.key()] = t;
      }
    } else {
      m.shards_.push_back(std::make_unique<safetensors_file>(safetensors_file::open(dir / "model.safetensors", mode)));
      for (const tensor_info& t : m.shards_.back()->tensors()) m.by_name_[t.name] = &t;
    }
    return m;
  }

  const tensor_info* find(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }
  const tensor_info& at(const std::string& name) const {
    if (const tensor_info* t = find(name)) return *t;
    detail::fail("model weights", "have no tensor '" + name + "'");
  }
  std::size_t size() const { return by_name_.size(); }
  std::size_t shards() const { return shards_.size(); }

 private:
  std::vector<std::unique_ptr<safetensors_file>> shards_;
  std::map<std::string, const tensor_info*> by_name_;
};

}  // namespace ropex
