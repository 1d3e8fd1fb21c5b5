// A minimal safetensors writer for the tests (independent of the reader under test): tensors
// packed back to back in the given order, header padded with spaces as the reference writer does
// only when asked, so both aligned and unaligned data offsets get exercised.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "ropex/types.hpp"

namespace ropex_test {

struct st_tensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16"
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

inline st_tensor make_tensor(const std::string& name, const std::string& dtype, std::vector<std::int64_t> shape,
                             const std::vector<float>& values) {
  st_tensor t{name, dtype, std::move(shape), {}};
  for (float v : values) {
    if (dtype == "F32") {
      std::uint8_t b[4];
      std::memcpy(b, &v, 4);
      t.bytes.insert(t.bytes.end(), b, b + 4);
    } else {
      const std::uint16_t h = dtype == "F16" ? ropex::detail::float_to_half_bits(v) : ropex::detail::float_to_bfloat16_bits(v);
      t.bytes.push_back(static_cast<std::uint8_t>(h & 0xff));
      t.bytes.push_back(static_cast<std::uint8_t>(h >> 8));
    }
  }
  return t;
}

inline std::vector<std::uint8_t> write_safetensors(const std::vector<st_tensor>& tensors, bool pad_to_8 = false,
                                                   const std::string& metadata_json = "") {
  std::string header = "{";
  if (!metadata_json.empty()) header += "\"__metadata__\":" + metadata_json + ",";
  std::size_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const st_tensor& t = tensors[i];
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) header += (d ? "," : "") + std::to_string(t.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes.size()) + "]}";
    if (i + 1 < tensors.size()) header += ",";
    offset += t.bytes.size();
  }
  header += "}";
  if (pad_to_8)
    while (header.size() % 8 != 0) header += ' ';
  std::vector<std::uint8_t> out;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (const st_tensor& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

inline void write_file(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A fresh directory under the system temp dir, removed by the destructor.
struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& name) {
    path = std::filesystem::temp_directory_path() / ("ropex-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace ropex_test
