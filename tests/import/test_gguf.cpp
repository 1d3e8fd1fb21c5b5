// GGUF metadata import: round trips of generated v2/v3 files, the <arch>.rope.* mapping, and
// robustness: every truncation and every single-byte corruption of a valid file either parses
// or throws ropex::gguf::format_error / std::invalid_argument -- never anything else, never an
// out-of-bounds read (run under -fsanitize=address,undefined to see the latter).
#include "catch.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gguf_writer.hpp"
#include "ropex/import/gguf.hpp"

using ropex::gguf::format_error;
using ropex::gguf::value_type;
using ropex_test::gguf_writer;

namespace {

// A Qwen2-like file with YaRN, every scalar type, string arrays and a nested array.
gguf_writer qwen2_yarn_file(std::uint32_t version) {
  gguf_writer w(version);
  w.str("general.architecture", "qwen2")
      .str("general.name", "Qwen2.5 7B Instruct")
      .u32("qwen2.context_length", 131072)
      .u32("qwen2.embedding_length", 3584)
      .u32("qwen2.attention.head_count", 28)
      .u32("qwen2.attention.head_count_kv", 4)
      .f32("qwen2.rope.freq_base", 1000000.0f)
      .str("qwen2.rope.scaling.type", "yarn")
      .f32("qwen2.rope.scaling.factor", 4.0f)
      .u32("qwen2.rope.scaling.original_context_length", 32768)
      .u8("test.u8", 200)
      .i8("test.i8", -100)
      .u16("test.u16", 60000)
      .i16("test.i16", -30000)
      .i32("test.i32", -2000000000)
      .u64("test.u64", 18000000000000000000ull)
      .i64("test.i64", -9000000000000000000ll)
      .f64("test.f64", 0.1)
      .boolean("test.bool", true)
      .u32_array("test.u32_array", {1, 2, 3})
      .str_array("tokenizer.ggml.tokens", {"<s>", "</s>", "hello", ""})
      .nested_i32("test.nested", {{1, -2}, {}, {3}})
      .tensor("token_embd.weight", {3584, 152064})
      .tensor("output_norm.weight", {3584});
  return w;
}

template <class F>
void require_format_error(F&& f, const std::string& contains) {
  try {
    f();
  } catch (const format_error& e) {
    CHECK_THAT(e.what(), contains_text(contains));
    return;
  }
  FAIL("no ropex::gguf::format_error thrown (expected one mentioning \"" << contains << "\")");
}

std::vector<unsigned char> header_only(std::uint32_t version, std::uint64_t tensors, std::uint64_t kvs) {
  std::vector<unsigned char> b{'G', 'G', 'U', 'F'};
  gguf_writer::le(b, version, 4);
  gguf_writer::le(b, tensors, 8);
  gguf_writer::le(b, kvs, 8);
  return b;
}

}  // namespace

TEST_CASE("gguf: v2 and v3 files round-trip every value type", "[import][gguf]") {
  for (std::uint32_t version : {2u, 3u}) {
    INFO("version " << version);
    const auto bytes = qwen2_yarn_file(version).bytes();
    const auto md = ropex::gguf::read_metadata(bytes.data(), bytes.size());
    CHECK(md.version == version);
    CHECK(md.tensor_count == 2);
    CHECK(md.values.size() == 22);
    CHECK(md.find("general.architecture")->string == "qwen2");
    CHECK(md.find("qwen2.rope.freq_base")->type == value_type::float32);
    CHECK(md.find("qwen2.rope.freq_base")->number == 1000000.0);
    CHECK(md.find("test.u8")->integer == 200);
    CHECK(md.find("test.i8")->integer == -100);
    CHECK(md.find("test.u16")->integer == 60000);
    CHECK(md.find("test.i16")->integer == -30000);
    CHECK(md.find("test.i32")->integer == -2000000000);
    CHECK(md.find("test.u64")->unsigned_integer == 18000000000000000000ull);
    CHECK_FALSE(md.find("test.u64")->integer.has_value());  // above INT64_MAX
    CHECK(md.find("test.i64")->integer == -9000000000000000000ll);
    CHECK(md.find("test.f64")->number == 0.1);
    CHECK(md.find("test.bool")->boolean);
    const auto& arr = *md.find("test.u32_array");
    CHECK(arr.array_type == value_type::uint32);
    REQUIRE(arr.array.size() == 3);
    CHECK(arr.array[2].integer == 3);
    const auto& tokens = *md.find("tokenizer.ggml.tokens");
    REQUIRE(tokens.array.size() == 4);
    CHECK(tokens.array[2].string == "hello");
    CHECK(tokens.array[3].string.empty());
    const auto& nested = *md.find("test.nested");
    REQUIRE(nested.array.size() == 3);
    CHECK(nested.array[0].array[1].integer == -2);
    CHECK(nested.array[1].array.empty());
    CHECK(md.tensor_names == std::vector<std::string>{"token_embd.weight", "output_norm.weight"});
  }
}

TEST_CASE("gguf: long arrays keep only their head but are walked to the end", "[import][gguf]") {
  gguf_writer w;
  std::vector<std::string> many(100, "tok");
  w.str("general.architecture", "llama").str_array("tokenizer.ggml.tokens", many).u32_array("x", {9, 8, 7, 6});
  w.u32("after", 42);
  const auto bytes = w.bytes();
  ropex::gguf::read_options o;
  o.max_array_elements_kept = 2;
  const auto md = ropex::gguf::read_metadata(bytes.data(), bytes.size(), o);
  CHECK(md.find("tokenizer.ggml.tokens")->array_count == 100);
  CHECK(md.find("tokenizer.ggml.tokens")->array.size() == 2);
  CHECK(md.find("x")->array.size() == 2);
  CHECK(md.find("after")->integer == 42);  // the skipped tails were consumed exactly
}

TEST_CASE("gguf: qwen2 YaRN maps to the same model_rope as its config.json", "[import][gguf]") {
  const auto bytes = qwen2_yarn_file(3).bytes();
  const auto m = ropex::parse_gguf(bytes.data(), bytes.size());
  CHECK(m.model_type == "qwen2");
  CHECK(m.rope_type == "yarn");
  CHECK(m.config.head_dim == 128);  // 3584 / 28
  CHECK(m.config.rotary_dim == 128);
  CHECK(m.config.base == 1e6);
  CHECK(m.config.layout == ropex::layout::half);  // llama.cpp: LLM_ARCH_QWEN2 -> NEOX
  CHECK(m.max_position == 131072);
  const auto& y = std::get<ropex::yarn>(m.policy);
  CHECK(y.factor == 4.0);
  CHECK(y.original_max_position == 32768);
  CHECK(y.truncate);
  const auto f = ropex::make_frequencies(m.config, m.policy);
  CHECK(f.attention_factor == Approx(1.1386294361).epsilon(1e-10));
  CHECK(m.softmax_scale_multiplier == 1.0);
}

TEST_CASE("gguf: llama is interleaved, key_length and dimension_count give partial rotary", "[import][gguf]") {
  gguf_writer w;
  w.str("general.architecture", "llama")
      .u32("llama.context_length", 4096)
      .u32("llama.embedding_length", 4096)
      .u32("llama.attention.head_count", 32)
      .u32("llama.attention.key_length", 128)
      .u32("llama.rope.dimension_count", 64)
      .tensor("rope_freqs.weight", {32});  // info only: read with read_rope_tensors off
  const auto bytes = w.bytes();
  ropex::gguf::read_options no_data;
  no_data.read_rope_tensors = false;
  const auto m = ropex::gguf::to_model_rope(ropex::gguf::read_metadata(bytes.data(), bytes.size(), no_data));
  CHECK(m.config.layout == ropex::layout::interleaved);  // llama.cpp un-permutes HF Llama weights
  CHECK(m.config.head_dim == 128);
  CHECK(m.config.rotary_dim == 64);
  CHECK(m.config.base == 10000.0);  // llama.cpp default when rope.freq_base is absent
  CHECK(std::holds_alternative<ropex::plain>(m.policy));
  REQUIRE(m.notes.size() == 1);
  CHECK_THAT(m.notes[0], contains_text("rope_freqs"));
  // Read by default: the info promises data the file does not have.
  require_format_error([&] { (void)ropex::parse_gguf(bytes.data(), bytes.size()); }, "tensor data");
  ropex::import_options o;
  o.layout = ropex::layout::half;
  CHECK(ropex::gguf::to_model_rope(ropex::gguf::read_metadata(bytes.data(), bytes.size(), no_data), o).config.layout ==
        ropex::layout::half);
}

TEST_CASE("gguf: deepseek2 MLA with yarn_log_multiplier gives the DeepSeek softmax multiplier", "[import][gguf]") {
  gguf_writer w;
  w.str("general.architecture", "deepseek2")
      .u32("deepseek2.context_length", 163840)
      .u32("deepseek2.embedding_length", 7168)
      .u32("deepseek2.attention.head_count", 128)
      .u32("deepseek2.attention.key_length", 192)
      .u32("deepseek2.attention.kv_lora_rank", 512)
      .u32("deepseek2.rope.dimension_count", 64)
      .f32("deepseek2.rope.freq_base", 10000.0f)
      .str("deepseek2.rope.scaling.type", "yarn")
      .f32("deepseek2.rope.scaling.factor", 40.0f)
      .u32("deepseek2.rope.scaling.original_context_length", 4096)
      .f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f);
  const auto bytes = w.bytes();
  const auto m = ropex::parse_gguf(bytes.data(), bytes.size());
  CHECK(m.config.layout == ropex::layout::interleaved);
  CHECK(m.config.head_dim == 64);
  CHECK(m.config.rotary_dim == 64);
  CHECK(m.qk_nope_head_dim == 128);  // key_length 192 - rope.dimension_count 64
  // The stored float32 0.1 is divided by 0.1f as llama.cpp does, giving mscale_all_dim = 1
  // exactly, so the multiplier matches the HF closed form (0.1 ln 40 + 1)^2 to rounding.
  CHECK(std::get<ropex::yarn>(m.policy).mscale_all_dim == 1.0);
  CHECK(m.softmax_scale_multiplier == Approx(std::pow(0.1 * std::log(40.0) + 1, 2)).epsilon(1e-14));
  CHECK(m.softmax_scale_multiplier == Approx(1.87385).epsilon(1e-5));
  const auto f = ropex::make_frequencies(m.config, m.policy);
  CHECK(f.attention_factor == Approx(1.0).epsilon(1e-12));
  // Newer files: key_length is the absorbed width (kv_lora_rank + 64 = 576), key_length_mla the head's.
  gguf_writer newer;
  newer.str("general.architecture", "deepseek2")
      .u32("deepseek2.context_length", 163840)
      .u32("deepseek2.attention.key_length", 576)
      .u32("deepseek2.attention.key_length_mla", 192)
      .u32("deepseek2.attention.kv_lora_rank", 512)
      .u32("deepseek2.rope.dimension_count", 64);
  const auto absorbed = newer.bytes();
  CHECK(ropex::parse_gguf(absorbed.data(), absorbed.size()).qk_nope_head_dim == 128);
}

TEST_CASE("gguf: linear, legacy scale_linear and attn_factor", "[import][gguf]") {
  auto base = [](gguf_writer& w) {
    w.str("general.architecture", "phi3")
        .u32("phi3.context_length", 4096)
        .u32("phi3.embedding_length", 3072)
        .u32("phi3.attention.head_count", 32)
        .u32("phi3.rope.dimension_count", 96);
  };
  gguf_writer lin;
  base(lin);
  lin.str("phi3.rope.scaling.type", "linear").f32("phi3.rope.scaling.factor", 2.0f);
  auto b1 = lin.bytes();
  CHECK(std::get<ropex::linear>(ropex::parse_gguf(b1.data(), b1.size()).policy).factor == 2.0);
  gguf_writer legacy;
  base(legacy);
  legacy.f32("phi3.rope.scale_linear", 4.0f);
  auto b2 = legacy.bytes();
  CHECK(std::get<ropex::linear>(ropex::parse_gguf(b2.data(), b2.size()).policy).factor == 4.0);
  gguf_writer attn;
  base(attn);
  attn.str("phi3.rope.scaling.type", "yarn").f32("phi3.rope.scaling.factor", 4.0f).f32("phi3.rope.scaling.attn_factor", 0.5f);
  auto b3 = attn.bytes();
  const auto m = ropex::parse_gguf(b3.data(), b3.size());
  // ggml: mscale = attn_factor * (1 + 0.1 ln s)
  CHECK(ropex::make_frequencies(m.config, m.policy).attention_factor ==
        Approx(0.5 * (1 + 0.1 * std::log(4.0))).epsilon(1e-15));
}

TEST_CASE("gguf: mapping errors name the key", "[import][gguf]") {
  auto file = [](const std::string& arch, auto&& extra) {
    gguf_writer w;
    w.str("general.architecture", arch)
        .u32(arch + ".context_length", 4096)
        .u32(arch + ".embedding_length", 4096)
        .u32(arch + ".attention.head_count", 32);
    extra(w);
    return w.bytes();
  };
  auto parse = [](const std::vector<unsigned char>& b) { (void)ropex::parse_gguf(b.data(), b.size()); };
  auto none = [](gguf_writer&) {};
  require_format_error([&] { parse(file("gptj", none)); }, "does not use RoPE");
  require_format_error([&] { parse(file("brand-new", none)); }, "import_options::layout");
  require_format_error([&] { parse(file("phi3", [](gguf_writer& w) { w.str("phi3.rope.scaling.type", "longrope"); })); },
                       "rope_factors_long.weight");  // longrope without its factor tensors
  require_format_error([&] { parse(file("llama", [](gguf_writer& w) { w.str("llama.rope.scaling.type", "wobble"); })); },
                       "llama.rope.scaling.type");
  require_format_error([&] { parse(file("llama", [](gguf_writer& w) { w.str("llama.rope.scaling.type", "linear"); })); },
                       "llama.rope.scaling.factor");
  require_format_error(
      [&] {
        parse(file("llama", [](gguf_writer& w) {
          w.str("llama.rope.scaling.type", "yarn").f32("llama.rope.scaling.factor", -4.0f);
        }));
      },
      "llama.rope.scaling.factor");
  require_format_error([&] { parse(file("llama", [](gguf_writer& w) { w.str("llama.rope.freq_base", "big"); })); },
                       "llama.rope.freq_base");
  require_format_error([&] { parse(file("llama", [](gguf_writer& w) { w.f32("llama.rope.freq_base", 0.5f); })); },
                       "llama.rope.freq_base");
  require_format_error([&] { parse(file("llama", [](gguf_writer& w) { w.u32("llama.rope.dimension_count", 63); })); },
                       "llama.rope.dimension_count");
  require_format_error([&] { parse(file("llama", [](gguf_writer& w) { w.u32("llama.rope.dimension_count", 256); })); },
                       "llama.rope.dimension_count");
  require_format_error([&] { parse(file("llama", [](gguf_writer& w) { w.f32("llama.attention.key_length", 1.5f); })); },
                       "llama.attention.key_length");
  gguf_writer no_ctx;
  no_ctx.str("general.architecture", "llama");
  const auto b = no_ctx.bytes();
  require_format_error([&] { parse(b); }, "llama.context_length");
  gguf_writer no_arch;
  no_arch.u32("llama.context_length", 1);
  const auto b2 = no_arch.bytes();
  require_format_error([&] { parse(b2); }, "general.architecture");
}

TEST_CASE("gguf: every truncation of a valid file throws format_error", "[import][gguf]") {
  for (std::uint32_t version : {2u, 3u}) {
    const auto bytes = qwen2_yarn_file(version).bytes();
    REQUIRE_NOTHROW(ropex::gguf::read_metadata(bytes.data(), bytes.size()));
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      // A fresh heap copy of exactly n bytes, so AddressSanitizer flags any read past the end.
      std::vector<unsigned char> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      INFO("version " << version << ", truncated to " << n << " of " << bytes.size() << " bytes");
      CHECK_THROWS_AS(ropex::gguf::read_metadata(prefix.data(), prefix.size()), format_error);
    }
  }
}

TEST_CASE("gguf: every single-byte corruption parses or throws std::invalid_argument", "[import][gguf]") {
  const auto bytes = qwen2_yarn_file(3).bytes();
  std::size_t parsed = 0, rejected = 0;
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    for (int xi : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
      std::vector<unsigned char> b = bytes;
      const auto x = static_cast<unsigned char>(xi);
      if (b[at] == x) continue;
      b[at] = x;
      try {
        (void)ropex::parse_gguf(b.data(), b.size());
        ++parsed;
      } catch (const std::invalid_argument&) {
        ++rejected;
      }
    }
  }
  CHECK(rejected > 0);
  CHECK(parsed > 0);  // e.g. changed digits inside a value are still a valid file
}

TEST_CASE("gguf: hostile sizes are refused before anything is allocated", "[import][gguf]") {
  auto read = [](const std::vector<unsigned char>& b) { (void)ropex::gguf::read_metadata(b.data(), b.size()); };
  require_format_error([&] { read({'G', 'G', 'U', 'X', 3, 0, 0, 0}); }, "not a GGUF file");
  require_format_error([&] { read(header_only(1, 0, 0)); }, "version 1");
  require_format_error([&] { read(header_only(0x03000000u, 0, 0)); }, "big-endian");
  require_format_error([&] { read(header_only(7, 0, 0)); }, "unsupported GGUF version");
  require_format_error([&] { read(header_only(3, 0, ~0ull)); }, "kv_count");
  require_format_error([&] { read(header_only(3, ~0ull, 0)); }, "tensor_count");

  auto one_key = [](std::uint64_t key_length) {
    auto b = header_only(3, 0, 1);
    gguf_writer::le(b, key_length, 8);
    b.insert(b.end(), 16, 'k');
    return b;
  };
  require_format_error([&] { read(one_key(~0ull)); }, "key length");
  require_format_error([&] { read(one_key(1ull << 62)); }, "key length");
  require_format_error([&] { read(one_key(60000)); }, "truncated");

  auto typed = [](std::uint32_t type, std::vector<unsigned char> payload) {
    auto b = header_only(3, 0, 1);
    gguf_writer::string(b, "key");
    gguf_writer::le(b, type, 4);
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
  };
  require_format_error([&] { read(typed(13, {0, 0, 0, 0})); }, "unknown value type 13");
  require_format_error([&] { read(typed(7, {2})); }, "must be 0 or 1");
  std::vector<unsigned char> huge_string;
  gguf_writer::le(huge_string, ~0ull - 3, 8);
  huge_string.resize(huge_string.size() + 8, 'a');
  require_format_error([&] { read(typed(8, huge_string)); }, "exceeds");
  std::vector<unsigned char> huge_array;
  gguf_writer::le(huge_array, 10, 4);  // uint64 elements
  gguf_writer::le(huge_array, 1ull << 61, 8);  // 2^61 * 8 overflows 64 bits if multiplied
  huge_array.resize(huge_array.size() + 64, 0);
  require_format_error([&] { read(typed(9, huge_array)); }, "claims");
  std::vector<unsigned char> bad_element;
  gguf_writer::le(bad_element, 99, 4);
  gguf_writer::le(bad_element, 1, 8);
  require_format_error([&] { read(typed(9, bad_element)); }, "unknown element type 99");
  // Arrays of arrays nested 9 deep (the limit is 8), each with one element.
  std::vector<unsigned char> deep;
  for (int d = 0; d < 9; ++d) {
    gguf_writer::le(deep, 9, 4);
    gguf_writer::le(deep, 1, 8);
  }
  deep.resize(deep.size() + 64, 0);
  require_format_error([&] { read(typed(9, deep)); }, "nested deeper");

  gguf_writer dup;
  dup.u32("a", 1).u32("a", 2);
  const auto b = dup.bytes();
  require_format_error([&] { read(b); }, "duplicate key");
  gguf_writer dims;
  dims.tensor("t", {1, 2, 3, 4, 5});
  const auto b2 = dims.bytes();
  require_format_error([&] { read(b2); }, "GGML_MAX_DIMS");
  CHECK_THROWS_AS(ropex::gguf::read_metadata(nullptr, 5), format_error);
  CHECK_THROWS_AS(ropex::gguf::read_metadata(nullptr, 0), format_error);
}

TEST_CASE("gguf: files are read from disk, errors name the path", "[import][gguf]") {
  const auto bytes = qwen2_yarn_file(2).bytes();
  const std::string path = "ropex_import_test.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const auto m = ropex::load_gguf(path);
  CHECK(m.config.base == 1e6);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), 40);
  }
  require_format_error([&] { (void)ropex::load_gguf(path); }, path);
  std::remove(path.c_str());
  require_format_error([&] { (void)ropex::load_gguf("/nonexistent/x.gguf"); }, "cannot be opened");
}

TEST_CASE("gguf: rope.dimension_sections gives M-RoPE axes (qwen2vl sections, qwen3vl interleaved)", "[import][gguf]") {
  auto file = [](const char* arch, std::vector<std::uint32_t> sections) {
    gguf_writer w;
    const std::string a = arch;
    w.str("general.architecture", arch)
        .u32(a + ".context_length", 128000)
        .u32(a + ".embedding_length", 3584)
        .u32(a + ".attention.head_count", 28)
        .f32(a + ".rope.freq_base", 1000000.0f)
        .u32_array(a + ".rope.dimension_sections", sections);
    return w.bytes();
  };
  const auto qwen2vl = file("qwen2vl", {16, 24, 24, 0});
  const auto m = ropex::parse_gguf(qwen2vl.data(), qwen2vl.size());
  REQUIRE(m.axes.has_value());
  CHECK(m.axes->assignment == ropex::axis_assignment::sections);
  CHECK(m.axes->mrope_section == std::vector<int>{16, 24, 24});  // trailing zero dropped
  CHECK(m.config.layout == ropex::layout::half);
  const auto qwen3vl = file("qwen3vl", {24, 20, 20, 0});
  const auto m3 = ropex::parse_gguf(qwen3vl.data(), qwen3vl.size());
  REQUIRE(m3.axes.has_value());
  CHECK(m3.axes->assignment == ropex::axis_assignment::interleaved);
  const auto bad = file("qwen2vl", {16, 24, 20, 0});  // sums to 60, not 64
  REQUIRE_THROWS_AS(ropex::parse_gguf(bad.data(), bad.size()), std::invalid_argument);
  const auto plain = qwen2_yarn_file(3).bytes();
  CHECK_FALSE(ropex::parse_gguf(plain.data(), plain.size()).axes.has_value());
}

TEST_CASE("gguf: rope_freqs.weight gives the freq_factors policy (Llama 3 GGUF), F32 and F16", "[import][gguf]") {
  // convert_hf_to_gguf writes 1, s or 1/((1-sigma)/s + sigma) per pair (docs/formulas.md 2.8).
  const ropex::llama3 l3{8, 1, 4, 8192};
  const auto want = ropex::make_frequencies(ropex::rope_config{128, 0, 500000.0}, l3).inv_freq;
  std::vector<float> ff(64);
  for (std::size_t i = 0; i < ff.size(); ++i)
    ff[i] = static_cast<float>(std::pow(500000.0, -2.0 * static_cast<double>(i) / 128) / want[i]);
  for (bool f16 : {false, true}) {
    gguf_writer w;
    w.str("general.architecture", "llama")
        .u32("llama.context_length", 131072)
        .u32("llama.embedding_length", 4096)
        .u32("llama.attention.head_count", 32)
        .f32("llama.rope.freq_base", 500000.0f)
        .tensor("token_embd.weight", {4096, 128256})
        .tensor_data("rope_freqs.weight", ff, f16);
    const auto bytes = w.bytes();
    const auto m = ropex::parse_gguf(bytes.data(), bytes.size());
    const auto& p = std::get<ropex::freq_factors>(m.policy);
    REQUIRE(p.factors.size() == 64);
    CHECK(m.rope_type == "freq_factors");
    const auto got = ropex::make_frequencies(m.config, m.policy).inv_freq;
    for (std::size_t i = 0; i < 64; ++i) CHECK(got[i] == Approx(want[i]).epsilon(f16 ? 1e-3 : 1e-7));
  }
  // A wrong length names the tensor.
  gguf_writer bad;
  bad.str("general.architecture", "llama")
      .u32("llama.context_length", 4096)
      .u32("llama.embedding_length", 4096)
      .u32("llama.attention.head_count", 32)
      .tensor_data("rope_freqs.weight", std::vector<float>(10, 1.0f));
  const auto b = bad.bytes();
  require_format_error([&] { (void)ropex::parse_gguf(b.data(), b.size()); }, "rope_freqs.weight");
}

TEST_CASE("gguf: sliding_window_pattern as a period, per-layer defaults and errors naming the key",
          "[import][gguf]") {
  auto base = [] {
    ropex_test::gguf_writer w;
    w.str("general.architecture", "qwen3")
        .u32("qwen3.context_length", 32768)
        .u32("qwen3.block_count", 8)
        .u32("qwen3.attention.key_length", 128)
        .f32("qwen3.rope.freq_base", 1e6f)
        .str("qwen3.rope.scaling.type", "linear")
        .f32("qwen3.rope.scaling.factor", 2.0f);
    return w;
  };
  auto parse = [](const ropex_test::gguf_writer& w) {
    const auto bytes = w.bytes();
    return ropex::parse_gguf(bytes.data(), bytes.size());
  };
  // Period 4 (llama.cpp set_swa_pattern): layers 3 and 7 full; the sliding ones keep the full
  // layers' width, rotary dims and linear scaling (llama.cpp copies it) at their own base.
  auto w = base();
  w.u32("qwen3.attention.sliding_window_pattern", 4).f32("qwen3.rope.freq_base_swa", 1e4f);
  const auto m = parse(w);
  REQUIRE(m.layers.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    INFO("layer " << i);
    const bool full = i % 4 == 3;
    CHECK(m.layers[i].layer_type == (full ? "full_attention" : "sliding_attention"));
    CHECK(m.layers[i].config.base == (full ? 1e6 : 1e4));
    CHECK(m.layers[i].config.head_dim == 128);
    CHECK(std::get<ropex::linear>(m.layers[i].policy).factor == 2.0);
  }
  // Without a pattern (and not gemma3) the file has no per-layer RoPE.
  CHECK(parse(base()).layers.empty());
  // Period 0: every layer slides.
  auto all = base();
  all.u32("qwen3.attention.sliding_window_pattern", 0);
  for (const auto& l : parse(all).layers) CHECK(l.layer_type == "sliding_attention");

  auto bad_length = base();
  bad_length.bool_array("qwen3.attention.sliding_window_pattern", {true, false});
  CHECK_THROWS_WITH(parse(bad_length), contains_text("qwen3.attention.sliding_window_pattern must have block_count = 8"));
  auto bad_base = base();
  bad_base.u32("qwen3.attention.sliding_window_pattern", 4).f32("qwen3.rope.freq_base_swa", 0.5f);
  CHECK_THROWS_WITH(parse(bad_base), contains_text("qwen3.rope.freq_base_swa must be > 1"));
  auto bad_dims = base();
  bad_dims.u32("qwen3.attention.sliding_window_pattern", 4).u32("qwen3.attention.key_length_swa", 64);
  CHECK_THROWS_WITH(parse(bad_dims), contains_text("qwen3.rope.dimension_count_swa is absent, so the sliding layers' "
                                                   "rotary dims (128) exceed their head_dim 64"));
}
