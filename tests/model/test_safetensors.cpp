#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "ropex/model/safetensors.hpp"
#include "safetensors_writer.hpp"

using namespace ropex_test;

namespace {

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i) - static_cast<float>(n) / 2);
  return v;
}

std::vector<st_tensor> sample_tensors() {
  return {make_tensor("a.weight", "F32", {2, 3}, ramp(6, 0.5f)), make_tensor("b", "F16", {5}, ramp(5, 0.25f)),
          make_tensor("c.bias", "BF16", {3, 1}, ramp(3, 2.0f)), make_tensor("empty", "F32", {0, 4}, {})};
}

// Every failure must be std::invalid_argument with a "ropex: " message: anything else escapes.
template <class F>
bool parses_or_names_error(F&& f) {
  try {
    f();
    return true;
  } catch (const std::invalid_argument& e) {
    REQUIRE(std::string(e.what()).rfind("ropex: ", 0) == 0);
    return false;
  }
}

}  // namespace

TEST_CASE("safetensors: F32, F16 and BF16 tensors read back, aligned or not", "[safetensors]") {
  for (bool pad : {false, true}) {
    const auto bytes = write_safetensors(sample_tensors(), pad, R"({"format":"pt"})");
    const auto f = ropex::safetensors_file::from_bytes(bytes);
    REQUIRE(f.tensors().size() == 4);
    REQUIRE(f.metadata().at("format") == "pt");
    const auto& a = f.at("a.weight");
    REQUIRE(a.dtype == ropex::tensor_dtype::f32);
    REQUIRE(a.shape == std::vector<std::int64_t>{2, 3});
    REQUIRE(ropex::tensor_to_float(a) == ramp(6, 0.5f));
    REQUIRE(ropex::tensor_to_float(f.at("b")) == ramp(5, 0.25f));  // exact in binary16
    REQUIRE(ropex::tensor_to_float(f.at("c.bias")) == ramp(3, 2.0f));
    REQUIRE(f.at("empty").elements == 0);
    REQUIRE(f.find("missing") == nullptr);
    REQUIRE_THROWS_WITH(f.at("missing"), contains_text("has no tensor 'missing'"));
  }
}

TEST_CASE("safetensors: bfloat16 rounds to nearest even on write and widens exactly", "[safetensors]") {
  const float x = 1.0f + 1.0f / 256;  // halfway between two bfloat16 values: rounds to even (1.0)
  const auto f = ropex::safetensors_file::from_bytes(write_safetensors({make_tensor("x", "BF16", {2}, {x, -3.5f})}));
  REQUIRE(ropex::tensor_to_float(f.at("x")) == std::vector<float>{1.0f, -3.5f});
}

TEST_CASE("safetensors: truncation at every byte is a named error", "[safetensors]") {
  const auto bytes = write_safetensors(sample_tensors(), false, R"({"format":"pt"})");
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    std::vector<std::uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(k));
    INFO("kept " << k << " of " << bytes.size() << " bytes");
    REQUIRE_FALSE(parses_or_names_error([&] { (void)ropex::safetensors_file::from_bytes(prefix); }));
  }
}

TEST_CASE("safetensors: every single-byte corruption of the header parses or is a named error", "[safetensors]") {
  const auto bytes = write_safetensors(sample_tensors(), false, R"({"format":"pt"})");
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | bytes[static_cast<std::size_t>(i)];
  const std::uint8_t replacements[] = {0x00, 0xff, 0x80, '"', '9', '-', '}', ']', ',', ' ', 'e', '.'};
  std::size_t errors = 0, parsed = 0;
  for (std::size_t k = 0; k < 8 + header; ++k)
    for (std::uint8_t r : replacements) {
      if (bytes[k] == r) continue;
      auto corrupt = bytes;
      corrupt[k] = r;
      INFO("byte " << k << " -> " << int(r));
      const bool ok = parses_or_names_error([&] {
        const auto f = ropex::safetensors_file::from_bytes(corrupt);
        // Whatever parsed must still read within the buffer.
        for (const auto& t : f.tensors()) {
          REQUIRE(t.data >= f.tensors().front().data - 8 - header);
          if (t.dtype == ropex::tensor_dtype::f32 || t.dtype == ropex::tensor_dtype::f16 ||
              t.dtype == ropex::tensor_dtype::bf16 || t.dtype == ropex::tensor_dtype::f64)
            (void)ropex::tensor_to_float(t);
        }
      });
      (ok ? parsed : errors)++;
    }
  REQUIRE(errors > 0);
  REQUIRE(parsed > 0);  // e.g. a changed letter inside a tensor name
}

TEST_CASE("safetensors: inconsistent headers name the field", "[safetensors]") {
  auto make = [](const std::string& header, std::size_t data_bytes) {
    std::vector<std::uint8_t> out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    out.resize(out.size() + data_bytes);
    return out;
  };
  using ropex::safetensors_file;
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes({1, 2, 3}), contains_text("header length"));
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(make("[]", 0)), contains_text("header must be a JSON object"));
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(make(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4)),
                      contains_text("tensor 'x'.data_offsets"));
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(make(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
                      contains_text("shape x dtype needs 12"));
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(make(R"({"x":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", 8)),
                      contains_text("tensor 'x'.dtype"));
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(make(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)),
                      contains_text("tensor 'x'.shape[0]"));
  REQUIRE_THROWS_WITH(
      safetensors_file::from_bytes(make(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8)),
      contains_text("more elements than the file"));
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(make(
                          R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12)),
                      contains_text("overlap"));
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(make(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8)),
                      contains_text("begin > end"));
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(make(R"({"__metadata__":{"a":1}})", 0)),
                      contains_text("__metadata__.a"));
  std::vector<std::uint8_t> huge(16, 0);
  huge[7] = 0x7f;  // header length near 2^63
  REQUIRE_THROWS_WITH(safetensors_file::from_bytes(huge), contains_text("header length"));
}

TEST_CASE("safetensors: memory-mapped and read files agree, sharded index", "[safetensors]") {
  temp_dir dir("safetensors");
  write_file(dir.path / "model.safetensors", write_safetensors(sample_tensors()));
  const auto mapped = ropex::safetensors_file::open(dir.path / "model.safetensors");
  const auto read = ropex::safetensors_file::open(dir.path / "model.safetensors", ropex::load_mode::read);
  REQUIRE_FALSE(read.mapped());
#ifdef ROPEX_SAFETENSORS_MMAP
  // A regular non-empty file on a POSIX system is mapped, not silently read into a buffer.
  REQUIRE(mapped.mapped());
#endif
  REQUIRE(ropex::tensor_to_float(mapped.at("a.weight")) == ropex::tensor_to_float(read.at("a.weight")));
  REQUIRE_THROWS_AS(ropex::safetensors_file::open(dir.path / "absent.safetensors"), std::runtime_error);

  const auto single = ropex::safetensors_model::open(dir.path);
  REQUIRE(single.size() == 4);
  REQUIRE(single.shards() == 1);

  temp_dir sharded("safetensors-sharded");
  auto t = sample_tensors();
  write_file(sharded.path / "model-00001-of-00002.safetensors", write_safetensors({t[0], t[1]}));
  write_file(sharded.path / "model-00002-of-00002.safetensors", write_safetensors({t[2]}));
  write_file(sharded.path / "model.safetensors.index.json",
             std::string(R"({"metadata":{"total_size":30},"weight_map":{"a.weight":"model-00001-of-00002.safetensors",)") +
                 R"("b":"model-00001-of-00002.safetensors","c.bias":"model-00002-of-00002.safetensors"}})");
  const auto m = ropex::safetensors_model::open(sharded.path);
  REQUIRE(m.shards() == 2);
  REQUIRE(ropex::tensor_to_float(m.at("c.bias")) == ramp(3, 2.0f));
  REQUIRE(ropex::tensor_to_float(m.at("b")) == ramp(5, 0.25f));

  write_file(sharded.path / "model.safetensors.index.json", std::string(R"({"weight_map":{"a.weight":"../x"}})"));
  REQUIRE_THROWS_WITH(ropex::safetensors_model::open(sharded.path), contains_text("weight_map.a.weight"));
  write_file(sharded.path / "model.safetensors.index.json",
             std::string(R"({"weight_map":{"zz":"model-00002-of-00002.safetensors"}})"));
  REQUIRE_THROWS_WITH(ropex::safetensors_model::open(sharded.path), contains_text("lacks it"));
}
