// GGUF metadata -> ropex::model_rope. Standard library only.
//
// Reads the header, the key/value section and the tensor-info names of GGUF v2 and v3 files
// (little-endian; ggml's gguf.cpp layout), from a byte buffer or from a file. Of the tensor data it
// reads only the small per-pair RoPE factor tensors (rope_freqs.weight, rope_factors_long.weight,
// rope_factors_short.weight; F32 or F16), which llama.cpp applies as theta / factor[i]. Then maps llama.cpp's `<arch>.rope.*` keys to the same model_rope the Hugging
// Face importer produces (docs/import.md has the table).
//
// Robustness contract: every read is bounds-checked against the bytes that remain, string and
// array lengths are capped by those bytes before anything is allocated, element counts are
// checked by division (no size overflow), array nesting is limited, and every failure throws
// ropex::gguf::format_error (a std::invalid_argument) saying what was being read and at which
// byte offset. Nothing is read out of bounds, whatever the input (fuzz/fuzz_gguf.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ropex/import/model_rope.hpp"
#include "ropex/types.hpp"

namespace ropex::gguf {

// A truncated, corrupt or unsupported file. Derives from std::invalid_argument, so callers that
// catch ropex's usual error type catch this too.
class format_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// GGUF value types (gguf.h, enum gguf_type).
enum class value_type : std::uint32_t {
  uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6,
  boolean = 7, string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12,
};

inline const char* type_name(value_type t) {
  switch (t) {
    case value_type::uint8: return "uint8";
    case value_type::int8: return "int8";
    case value_type::uint16: return "uint16";
    case value_type::int16: return "int16";
    case value_type::uint32: return "uint32";
    case value_type::int32: return "int32";
    case value_type::float32: return "float32";
    case value_type::boolean: return "bool";
    case value_type::string: return "string";
    case value_type::array: return "array";
    case value_type::uint64: return "uint64";
    case value_type::int64: return "int64";
    case value_type::float64: return "float64";
  }
  return "unknown";
}

struct value {
  value_type type = value_type::uint8;
  // Integers are stored in whichever of these can hold them (both when both can).
  std::optional<std::int64_t> integer;
  std::optional<std::uint64_t> unsigned_integer;
  double number = 0;  // every numeric type, converted to double (exact for float32/float64)
  bool boolean = false;
  std::string string;
  // Arrays: element type and count as written; the first read_options::max_array_elements_kept
  // elements are kept (tokenizer vocabularies hold 10^5 strings that RoPE never needs).
  value_type array_type = value_type::uint8;
  std::uint64_t array_count = 0;
  std::vector<value> array;

  bool is_number() const {
    return type != value_type::boolean && type != value_type::string && type != value_type::array;
  }
  bool is_integer() const { return is_number() && type != value_type::float32 && type != value_type::float64; }
};

struct metadata {
  std::uint32_t version = 0;
  std::uint64_t tensor_count = 0;
  std::map<std::string, value> values;
  std::vector<std::string> tensor_names;  // filled when read_options::read_tensor_names
  // The RoPE factor tensors found (read_options::read_rope_tensors), by name, as doubles.
  std::map<std::string, std::vector<double>> rope_tensors;

  const value* find(const std::string& key) const {
    const auto it = values.find(key);
    return it == values.end() ? nullptr : &it->second;
  }
};

struct read_options {
  std::uint64_t max_array_elements_kept = 4096;
  bool read_tensor_names = true;  // also walk the tensor-info section (names only)
  unsigned max_array_depth = 8;   // arrays of arrays nest at most this deep
  bool read_rope_tensors = true;  // read the data of rope_freqs / rope_factors_long / _short
};

// Tensors whose data the importer reads: per-pair frequency divisors, ggml's rope `freq_factors`.
inline bool is_rope_factor_tensor(const std::string& name) {
  return name == "rope_freqs.weight" || name == "rope_factors_long.weight" || name == "rope_factors_short.weight";
}

namespace detail {

// Byte sources: remaining() is exact, so every read can be checked before it happens.
struct buffer_source {
  const unsigned char* data;
  std::uint64_t size;
  std::uint64_t pos = 0;
  std::uint64_t remaining() const { return size - pos; }
  std::uint64_t offset() const { return pos; }
  void read(void* dst, std::uint64_t n) {  // n <= remaining(), checked by the parser
    if (n != 0) std::memcpy(dst, data + pos, static_cast<std::size_t>(n));
    pos += n;
  }
  void skip(std::uint64_t n) { pos += n; }
};

struct file_source {
  std::ifstream in;
  std::uint64_t size = 0;
  std::uint64_t pos = 0;
  std::uint64_t remaining() const { return size - pos; }
  std::uint64_t offset() const { return pos; }
  void read(void* dst, std::uint64_t n) {
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!in) throw format_error("ropex: gguf: read error at byte offset " + std::to_string(pos));
    pos += n;
  }
  void skip(std::uint64_t n) {
    in.seekg(static_cast<std::streamoff>(n), std::ios::cur);
    if (!in) throw format_error("ropex: gguf: seek error at byte offset " + std::to_string(pos));
    pos += n;
  }
};

// Size in bytes of a fixed-size scalar; 0 for string and array.
inline std::uint64_t scalar_size(value_type t) {
  switch (t) {
    case value_type::uint8: case value_type::int8: case value_type::boolean: return 1;
    case value_type::uint16: case value_type::int16: return 2;
    case value_type::uint32: case value_type::int32: case value_type::float32: return 4;
    case value_type::uint64: case value_type::int64: case value_type::float64: return 8;
    default: return 0;
  }
}

// Smallest encoding of one value of type t: strings carry a u64 length, arrays a u32 type and
// a u64 count. Used to bound counts by the bytes that remain.
inline std::uint64_t min_encoded_size(value_type t) {
  if (t == value_type::string) return 8;
  if (t == value_type::array) return 12;
  return scalar_size(t);
}

inline bool known_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(value_type::float64); }

template <class Source>
class parser {
 public:
  parser(Source& source, const read_options& options) : src_(source), options_(options) {}

  metadata parse() {
    metadata md;
    unsigned char magic[4];
    need(4, "magic");
    src_.read(magic, 4);
    if (std::memcmp(magic, "GGUF", 4) != 0) fail("not a GGUF file (magic is not \"GGUF\")");
    md.version = read_u32("version");
    if (md.version == 1) fail("GGUF version 1 (32-bit lengths) is not supported; only versions 2 and 3");
    if (md.version != 2 && md.version != 3) {
      // v3 allows big-endian files, whose version field then reads byte-swapped here.
      if ((md.version & 0xFFFFu) == 0) fail("big-endian GGUF files are not supported");
      fail("unsupported GGUF version " + std::to_string(md.version) + " (only 2 and 3)");
    }
    md.tensor_count = read_u64("tensor_count");
    const std::uint64_t kv_count = read_u64("kv_count");
    // Smallest key/value: u64 key length + 1 key byte + u32 type + 1 value byte.
    if (kv_count > src_.remaining() / 14)
      fail("kv_count " + std::to_string(kv_count) + " cannot fit in the remaining " +
           std::to_string(src_.remaining()) + " bytes");
    for (std::uint64_t k = 0; k < kv_count; ++k) {
      std::string key = read_string("key", true, 65535);
      if (key.empty()) fail("empty key");
      const std::uint32_t type = read_u32("value type of key \"" + key + "\"");
      if (!known_type(type)) fail("unknown value type " + std::to_string(type) + " of key \"" + key + "\"");
      value v = read_value(static_cast<value_type>(type), 0, key);
      if (!md.values.emplace(key, std::move(v)).second) fail("duplicate key \"" + key + "\"");
    }
    if (options_.read_tensor_names) {
      // Smallest tensor info: u64 name length + u32 n_dims + u32 type + u64 offset.
      if (md.tensor_count > src_.remaining() / 24)
        fail("tensor_count " + std::to_string(md.tensor_count) + " cannot fit in the remaining " +
             std::to_string(src_.remaining()) + " bytes");
      struct wanted {
        std::string name;
        std::uint64_t elements, type, offset;
      };
      std::vector<wanted> rope;
      for (std::uint64_t t = 0; t < md.tensor_count; ++t) {
        std::string name = read_string("tensor name", true, 65535);
        const std::uint32_t n_dims = read_u32("n_dims of tensor \"" + name + "\"");
        if (n_dims > 4) fail("tensor \"" + name + "\" has " + std::to_string(n_dims) + " dims (GGML_MAX_DIMS is 4)");
        std::uint64_t elements = 1;
        for (std::uint32_t d = 0; d < n_dims; ++d) {
          const std::uint64_t extent = read_u64("dimension of tensor \"" + name + "\"");
          elements = extent != 0 && elements > (std::uint64_t{1} << 62) / extent ? (std::uint64_t{1} << 62)
                                                                                : elements * extent;
        }
        const std::uint32_t type = read_u32("type of tensor \"" + name + "\"");
        const std::uint64_t offset = read_u64("offset of tensor \"" + name + "\"");
        if (options_.read_rope_tensors && is_rope_factor_tensor(name)) rope.push_back({name, elements, type, offset});
        md.tensor_names.push_back(std::move(name));
      }
      if (!rope.empty()) read_rope_tensors(md, rope);
    }
    return md;
  }

 private:
  // Tensor data starts at the next multiple of general.alignment (default 32) after the infos;
  // offsets are relative to it. The factor tensors are a few hundred bytes: F32 or F16 only.
  template <class Wanted>
  void read_rope_tensors(metadata& md, std::vector<Wanted>& rope) {
    std::uint64_t alignment = 32;
    if (const auto it = md.values.find("general.alignment"); it != md.values.end()) {
      const value& a = it->second;
      if (!a.is_integer() || !a.unsigned_integer || *a.unsigned_integer == 0 ||
          (*a.unsigned_integer & (*a.unsigned_integer - 1)) != 0)
        fail("general.alignment must be a power of two");
      alignment = *a.unsigned_integer;
    }
    const std::uint64_t here = src_.offset();
    const std::uint64_t data_start = here + (alignment - here % alignment) % alignment;
    if (data_start > src_.size) fail("truncated: the tensor data section (RoPE factor tensors) is missing");
    std::sort(rope.begin(), rope.end(), [](const Wanted& a, const Wanted& b) { return a.offset < b.offset; });
    for (const Wanted& t : rope) {
      if (t.type != 0 && t.type != 1)
        fail("tensor \"" + t.name + "\" has ggml type " + std::to_string(t.type) + "; only F32 (0) and F16 (1) are read");
      if (t.elements == 0 || t.elements > 65536)
        fail("tensor \"" + t.name + "\" has " + std::to_string(t.elements) + " elements (expected rotary_dim/2)");
      if (t.offset > src_.size - data_start || t.offset % alignment != 0)
        fail("tensor \"" + t.name + "\" offset " + std::to_string(t.offset) + " is outside the data or misaligned");
      const std::uint64_t at = data_start + t.offset;
      if (at < src_.offset()) fail("tensor \"" + t.name + "\" overlaps another RoPE tensor");
      need(at - src_.offset(), "padding before tensor \"" + t.name + "\"");
      src_.skip(at - src_.offset());
      const unsigned width = t.type == 0 ? 4 : 2;
      need(t.elements * width, "data of tensor \"" + t.name + "\"");
      std::vector<double> values(static_cast<std::size_t>(t.elements));
      for (double& v : values) {
        const std::uint64_t bits = read_le(width, "data of tensor \"" + t.name + "\"");
        if (width == 4) {
          float f;
          const auto u = static_cast<std::uint32_t>(bits);
          std::memcpy(&f, &u, 4);
          v = f;
        } else {
          v = ropex::detail::half_bits_to_float(static_cast<std::uint16_t>(bits));
        }
      }
      md.rope_tensors[t.name] = std::move(values);
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw format_error("ropex: gguf: " + what + " (at byte offset " + std::to_string(src_.offset()) + ")");
  }

  void need(std::uint64_t n, const std::string& what) const {
    if (n > src_.remaining())
      fail("truncated: " + what + " needs " + std::to_string(n) + " bytes, " + std::to_string(src_.remaining()) +
           " left");
  }

  // Little-endian by construction (byte assembly), whatever the host order.
  std::uint64_t read_le(unsigned bytes, const std::string& what) {
    need(bytes, what);
    unsigned char b[8];
    src_.read(b, bytes);
    std::uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    return v;
  }
  std::uint32_t read_u32(const std::string& what) { return static_cast<std::uint32_t>(read_le(4, what)); }
  std::uint64_t read_u64(const std::string& what) { return read_le(8, what); }

  std::string read_string(const std::string& what, bool keep, std::uint64_t max_length) {
    const std::uint64_t length = read_u64("length of " + what);
    if (length > max_length) fail(what + " length " + std::to_string(length) + " exceeds " + std::to_string(max_length));
    need(length, what);  // caps the allocation below by the bytes actually present
    std::string s;
    if (keep) {
      s.resize(static_cast<std::size_t>(length));
      src_.read(s.data(), length);
    } else {
      src_.skip(length);
    }
    return s;
  }

  value read_value(value_type type, unsigned depth, const std::string& key) {
    value v;
    v.type = type;
    const std::string what = "value of key \"" + key + "\"";
    switch (type) {
      case value_type::uint8: case value_type::uint16: case value_type::uint32: case value_type::uint64: {
        const std::uint64_t u = read_le(static_cast<unsigned>(scalar_size(type)), what);
        v.unsigned_integer = u;
        if (u <= static_cast<std::uint64_t>(INT64_MAX)) v.integer = static_cast<std::int64_t>(u);
        v.number = static_cast<double>(u);
        break;
      }
      case value_type::int8: case value_type::int16: case value_type::int32: case value_type::int64: {
        const unsigned bytes = static_cast<unsigned>(scalar_size(type));
        const std::uint64_t raw = read_le(bytes, what);
        // Sign-extend from `bytes` bytes without relying on implementation-defined conversions.
        const std::uint64_t sign = std::uint64_t{1} << (8 * bytes - 1);
        const std::uint64_t mask = bytes == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * bytes)) - 1;
        const std::uint64_t m = raw & mask;
        std::int64_t s;
        if (m & sign) {
          const std::uint64_t magnitude = (~m & mask) + 1;  // two's complement magnitude, <= 2^63
          s = magnitude == (std::uint64_t{1} << 63) ? INT64_MIN : -static_cast<std::int64_t>(magnitude);
        } else {
          s = static_cast<std::int64_t>(m);
        }
        v.integer = s;
        if (s >= 0) v.unsigned_integer = static_cast<std::uint64_t>(s);
        v.number = static_cast<double>(s);
        break;
      }
      case value_type::float32: {
        const std::uint32_t bits = static_cast<std::uint32_t>(read_le(4, what));
        float f;
        std::memcpy(&f, &bits, 4);
        v.number = static_cast<double>(f);
        break;
      }
      case value_type::float64: {
        const std::uint64_t bits = read_le(8, what);
        double d;
        std::memcpy(&d, &bits, 8);
        v.number = d;
        break;
      }
      case value_type::boolean: {
        const std::uint64_t b = read_le(1, what);
        if (b > 1) fail("bool " + what + " is " + std::to_string(b) + " (must be 0 or 1)");
        v.boolean = b == 1;
        break;
      }
      case value_type::string:
        v.string = read_string("string " + what, true, src_.remaining());
        break;
      case value_type::array: {
        if (depth >= options_.max_array_depth)
          fail("arrays nested deeper than " + std::to_string(options_.max_array_depth) + " in " + what);
        const std::uint32_t element = read_u32("element type of array " + what);
        if (!known_type(element)) fail("unknown element type " + std::to_string(element) + " of array " + what);
        v.array_type = static_cast<value_type>(element);
        v.array_count = read_u64("element count of array " + what);
        const std::uint64_t min_size = min_encoded_size(v.array_type);
        if (v.array_count > src_.remaining() / min_size)  // division: no overflow in count * size
          fail("array " + what + " claims " + std::to_string(v.array_count) + " elements, more than the remaining " +
               std::to_string(src_.remaining()) + " bytes can hold");
        const std::uint64_t kept = v.array_count < options_.max_array_elements_kept ? v.array_count
                                                                                      : options_.max_array_elements_kept;
        v.array.reserve(static_cast<std::size_t>(kept));
        for (std::uint64_t i = 0; i < kept; ++i) v.array.push_back(read_value(v.array_type, depth + 1, key));
        const std::uint64_t rest = v.array_count - kept;
        if (const std::uint64_t fixed = scalar_size(v.array_type); fixed != 0) {
          need(rest * fixed, "array " + what);  // rest * fixed <= remaining by the check above
          src_.skip(rest * fixed);
        } else {
          for (std::uint64_t i = 0; i < rest; ++i) (void)skip_value(v.array_type, depth + 1, key);
        }
        break;
      }
    }
    return v;
  }

  // Walks a value without keeping it (the tail of long string arrays).
  bool skip_value(value_type type, unsigned depth, const std::string& key) {
    if (type == value_type::string) {
      (void)read_string("string in array of key \"" + key + "\"", false, src_.remaining());
      return true;
    }
    if (type == value_type::array) {
      value ignored = read_value(type, depth, key);
      return true;
    }
    const std::uint64_t n = scalar_size(type);
    need(n, "array element of key \"" + key + "\"");
    src_.skip(n);
    return true;
  }

  Source& src_;
  read_options options_;
};

}  // namespace detail

// Parses the metadata of a GGUF image in memory (only the header and key/value section need be
// present; read_tensor_names also needs the tensor-info section).
inline metadata read_metadata(const void* data, std::size_t size, const read_options& options = {}) {
  if (data == nullptr && size != 0) throw format_error("ropex: gguf: null buffer with non-zero size");
  detail::buffer_source src{static_cast<const unsigned char*>(data), size};
  return detail::parser<detail::buffer_source>(src, options).parse();
}

// Parses the metadata of a GGUF file, reading only as far as the tensor-info section.
inline metadata read_metadata_file(const std::string& path, const read_options& options = {}) {
  detail::file_source src;
  src.in.open(path, std::ios::binary | std::ios::ate);
  if (!src.in) throw format_error("ropex: gguf: " + path + " cannot be opened");
  const std::streamoff end = src.in.tellg();
  if (end < 0) throw format_error("ropex: gguf: " + path + " has no readable size");
  src.size = static_cast<std::uint64_t>(end);
  src.in.seekg(0);
  try {
    return detail::parser<detail::file_source>(src, options).parse();
  } catch (const format_error& e) {
    throw format_error(path + ": " + e.what());
  }
}

namespace detail {

// Pair layout per llama.cpp's llama_model_rope_type(): LLAMA_ROPE_TYPE_NORM operates on
// consecutive pairs (interleaved; llama.cpp's converter un-permutes HF Llama weights back to
// Meta's order), LLAMA_ROPE_TYPE_NEOX on pairs offset by n_rot/2 (half).
enum class arch_rope { interleaved, half, none, unknown };

inline arch_rope rope_type_of_arch(const std::string& arch) {
  static const char* const norm[] = {
      "llama",   "llama4",  "deci",     "baichuan", "starcoder", "orion",   "internlm2", "minicpm",
      "xverse",  "command-r", "cohere2", "olmo",    "arctic",    "deepseek", "deepseek2", "chatglm",
      "granite", "granitemoe", "chameleon", "plm",  "bailingmoe", "smollm3", "arcee",    "ernie4_5",
      "mistral3"};
  static const char* const neox[] = {
      "falcon",   "grok",     "dbrx",     "bert",     "nomic-bert", "stablelm", "bitnet",    "qwen",
      "qwen2",    "qwen2moe", "qwen3",    "qwen3moe", "olmo2",      "olmoe",    "phi2",      "phi3",
      "phimoe",   "gemma",    "gemma2",   "gemma3",   "gemma3n",    "gemma4",   "starcoder2", "openelm",
      "gptneox",  "codeshell", "nemotron", "exaone",  "minicpm3",   "gpt-oss",  "qwen2vl",   "qwen3vl",
      "qwen3vlmoe"};
  static const char* const none[] = {"gpt2", "gptj", "mpt", "refact", "bloom", "mamba", "t5", "t5encoder",
                                     "jais", "rwkv6", "jina-bert-v2"};
  for (const char* a : norm)
    if (arch == a) return arch_rope::interleaved;
  for (const char* a : neox)
    if (arch == a) return arch_rope::half;
  for (const char* a : none)
    if (arch == a) return arch_rope::none;
  return arch_rope::unknown;
}

struct key_reader {
  const metadata& md;

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw format_error("ropex: gguf key " + key + " " + why);
  }
  const value* find(const std::string& key) const { return md.find(key); }

  std::string string_of(const std::string& key) const {
    const value* v = find(key);
    if (v == nullptr) fail(key, "is required");
    if (v->type != value_type::string) fail(key, std::string("must be a string (got ") + type_name(v->type) + ")");
    return v->string;
  }
  std::optional<double> number_of(const std::string& key) const {
    const value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail(key, std::string("must be a number (got ") + type_name(v->type) + ")");
    if (!std::isfinite(v->number)) fail(key, "must be finite");
    return v->number;
  }
  // Integer in [lo, hi]. llama.cpp allows a per-layer array for some counts; the first entry
  // is the one that matters for RoPE geometry, and every entry must agree (checked).
  std::optional<std::int64_t> integer_of(const std::string& key, std::int64_t lo, std::int64_t hi) const {
    const value* v = find(key);
    if (v == nullptr) return std::nullopt;
    auto one = [&](const value& e) -> std::int64_t {
      if (!e.is_integer()) fail(key, std::string("must be an integer (got ") + type_name(e.type) + ")");
      if (!e.integer || *e.integer < lo || *e.integer > hi)
        fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return *e.integer;
    };
    if (v->type != value_type::array) return one(*v);
    if (v->array.empty()) fail(key, "is an empty array");
    const std::int64_t first = one(v->array.front());
    for (const value& e : v->array)
      if (one(e) != first) fail(key, "differs between layers; per-layer RoPE geometry is not supported");
    return first;
  }
};

// Sliding-window (iSWA) models: llama.cpp gives the sliding layers their own RoPE base
// (rope.freq_base_swa), head width (attention.key_length_swa) and rotary dims
// (rope.dimension_count_swa), each defaulting to the full layers' value; Gemma 3 files carry no
// pattern and llama.cpp fixes it at 6 with base 10000 and no frequency scaling. Fills
// out.layers (full layers keep out.config / out.policy); docs/import.md "Sliding-window layers".
inline void add_sliding_window_layers(const key_reader& keys, const std::string& arch, model_rope& out) {
  const std::string p = arch + ".";
  constexpr std::int64_t max_layers = std::int64_t{1} << 20;
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  const value* pattern = keys.find(pattern_key);
  const bool gemma3 = arch == "gemma3";
  if (pattern == nullptr) {
    if (!gemma3) return;
    // llama.cpp's gemma3 turns sliding windows on when attention.sliding_window > 0.
    const auto window = keys.integer_of(p + "attention.sliding_window", 0, std::int64_t{1} << 40);
    if (!window || *window == 0) return;
  }
  const auto n = keys.integer_of(p + "block_count", 1, max_layers);
  if (!n) {
    if (pattern == nullptr) return;
    keys.fail(p + "block_count", "is required with attention.sliding_window_pattern");
  }
  std::vector<bool> sliding(static_cast<std::size_t>(*n));
  if (pattern != nullptr && pattern->type == value_type::array) {
    // One flag per layer, true = sliding window (llama.cpp get_key_or_arr into is_swa).
    if (pattern->array_count != static_cast<std::uint64_t>(*n) || pattern->array.size() != sliding.size())
      keys.fail(pattern_key, "must have block_count = " + std::to_string(*n) + " entries (got " +
                                 std::to_string(pattern->array_count) + ")");
    for (std::size_t i = 0; i < sliding.size(); ++i) {
      const value& e = pattern->array[i];
      if (e.type == value_type::boolean) sliding[i] = e.boolean;
      else if (e.is_integer() && e.integer && (*e.integer == 0 || *e.integer == 1)) sliding[i] = *e.integer == 1;
      else keys.fail(pattern_key + "[" + std::to_string(i) + "]", "must be a bool (or 0/1)");
    }
  } else {
    // A period k (llama.cpp set_swa_pattern): layer i slides iff k == 0 or i % k < k - 1, so every
    // k-th layer is full. Gemma 3 files carry none; llama.cpp uses 6.
    const std::int64_t k = pattern != nullptr ? *keys.integer_of(pattern_key, 0, max_layers) : 6;
    for (std::int64_t i = 0; i < *n; ++i) sliding[static_cast<std::size_t>(i)] = k == 0 || i % k < k - 1;
  }

  rope_config swa = out.config;
  if (const auto base = keys.number_of(p + "rope.freq_base_swa")) {
    if (!(*base > 1)) keys.fail(p + "rope.freq_base_swa", "must be > 1 (got " + std::to_string(*base) + ")");
    swa.base = *base;
    if (gemma3 && *base != 10000.0)
      out.notes.push_back("rope.freq_base_swa is " + std::to_string(*base) +
                          " but llama.cpp runs gemma3 sliding layers at base 10000");
  } else if (gemma3) {
    swa.base = 10000.0;
  }
  constexpr std::int64_t max_dim = std::int64_t{1} << 16;
  if (const auto head = keys.integer_of(p + "attention.key_length_swa", 1, max_dim)) swa.head_dim = static_cast<int>(*head);
  const auto dims = keys.integer_of(p + "rope.dimension_count_swa", 2, max_dim);
  if (dims) swa.rotary_dim = static_cast<int>(*dims);
  if (rotary_dim_of(swa) > swa.head_dim)
    keys.fail(p + "rope.dimension_count_swa", std::string(dims ? "" : "is absent, so ") + "the sliding layers' rotary dims (" +
                                                  std::to_string(rotary_dim_of(swa)) + ") exceed their head_dim " +
                                                  std::to_string(swa.head_dim));
  if (rotary_dim_of(swa) % 2 != 0)
    keys.fail(p + "rope.dimension_count_swa", "must be even (got " + std::to_string(rotary_dim_of(swa)) + ")");

  // llama.cpp copies the full layers' frequency scaling to the sliding ones unless the
  // architecture says otherwise: Gemma 3 fixes it at 1, and Gemma 4's rope_freqs tensor (its
  // proportional RoPE) is built for the full layers only.
  scaling swa_policy = out.policy;
  const bool per_pair = std::holds_alternative<freq_factors>(out.policy) || std::holds_alternative<longrope>(out.policy);
  if (gemma3 || arch == "gemma4") {
    swa_policy = plain{};
  } else if (per_pair && rotary_dim_of(swa) != rotary_dim_of(out.config)) {
    swa_policy = plain{};
    out.notes.push_back(std::string("sliding layers given plain frequencies: the per-pair ") + rope_type_name(out.policy) +
                        " factors are sized for the full layers' rotary dims");
  }

  out.layers.clear();
  for (std::size_t i = 0; i < sliding.size(); ++i) {
    layer_rope l;
    l.layer_type = sliding[i] ? "sliding_attention" : "full_attention";
    l.config = sliding[i] ? swa : out.config;
    l.policy = sliding[i] ? swa_policy : out.policy;
    out.layers.push_back(std::move(l));
  }
}

}  // namespace detail

// Maps `<arch>.*` metadata to model_rope. Keys and defaults: docs/import.md.
inline model_rope to_model_rope(const metadata& md, const import_options& options = {}) {
  const detail::key_reader keys{md};
  model_rope out;
  const std::string arch = keys.string_of("general.architecture");
  out.model_type = arch;
  const std::string p = arch + ".";
  constexpr std::int64_t max_dim = std::int64_t{1} << 16;

  const auto ctx = keys.integer_of(p + "context_length", 1, ropex::detail::max_abs_position);
  if (!ctx) keys.fail(p + "context_length", "is required");
  out.max_position = *ctx;

  const auto rope_dims = keys.integer_of(p + "rope.dimension_count", 2, max_dim);
  std::int64_t head_dim = 0;
  if (keys.find(p + "attention.kv_lora_rank") != nullptr) {
    // MLA (deepseek2): RoPE runs on its own rope.dimension_count slice, as in the HF importer.
    if (!rope_dims) keys.fail(p + "rope.dimension_count", "is required for MLA models (attention.kv_lora_rank set)");
    head_dim = *rope_dims;
    // llama.cpp: n_embd_head_qk_nope = n_embd_head_k_mla - n_rot, where n_embd_head_k_mla is
    // attention.key_length_mla when present (newer files, whose key_length is the absorbed width).
    std::string key = p + "attention.key_length_mla";
    auto qk_head = keys.integer_of(key, 1, max_dim);
    if (!qk_head) qk_head = keys.integer_of(key = p + "attention.key_length", 1, max_dim);
    if (qk_head) {
      if (*qk_head < head_dim)
        keys.fail(key, "(" + std::to_string(*qk_head) + ") is less than rope.dimension_count " + std::to_string(head_dim));
      out.qk_nope_head_dim = static_cast<int>(*qk_head - head_dim);
    }
  } else if (const auto key_length = keys.integer_of(p + "attention.key_length", 1, max_dim)) {
    head_dim = *key_length;
  } else {
    const auto embd = keys.integer_of(p + "embedding_length", 1, std::int64_t{1} << 40);
    const auto heads = keys.integer_of(p + "attention.head_count", 1, std::int64_t{1} << 20);
    if (!embd) keys.fail(p + "embedding_length", "is required when attention.key_length is absent");
    if (!heads) keys.fail(p + "attention.head_count", "is required when attention.key_length is absent");
    head_dim = *embd / *heads;  // llama.cpp: n_embd_head_k = n_embd / n_head
    if (head_dim < 1 || head_dim > max_dim)
      keys.fail(p + "embedding_length", "/ attention.head_count gives head_dim " + std::to_string(head_dim));
  }
  const std::int64_t rotary_dim = rope_dims ? *rope_dims : head_dim;
  if (rotary_dim > head_dim)
    keys.fail(p + "rope.dimension_count", "(" + std::to_string(rotary_dim) + ") exceeds head_dim " + std::to_string(head_dim));
  if (rotary_dim % 2 != 0) keys.fail(p + "rope.dimension_count", "must be even (got " + std::to_string(rotary_dim) + ")");
  out.config.head_dim = static_cast<int>(head_dim);
  out.config.rotary_dim = static_cast<int>(rotary_dim);

  if (const auto base = keys.number_of(p + "rope.freq_base")) {
    if (!(*base > 1)) keys.fail(p + "rope.freq_base", "must be > 1 (got " + std::to_string(*base) + ")");
    out.config.base = *base;
  }

  // Scaling: rope.scaling.type, or the legacy rope.scale_linear (llama.cpp: freq_scale = 1/x).
  std::string type = "none";
  const value* type_value = keys.find(p + "rope.scaling.type");
  const auto legacy_linear = keys.number_of(p + "rope.scale_linear");
  if (type_value != nullptr) type = keys.string_of(p + "rope.scaling.type");
  else if (legacy_linear && *legacy_linear != 1.0) type = "linear";
  out.rope_type = type;
  auto positive_factor = [&]() {
    std::optional<double> f = keys.number_of(p + "rope.scaling.factor");
    if (!f && type_value == nullptr) f = legacy_linear;
    if (!f) keys.fail(p + "rope.scaling.factor", "is required for rope.scaling.type " + type);
    if (!(*f > 0)) keys.fail(p + "rope.scaling.factor", "must be > 0 (got " + std::to_string(*f) + ")");
    return *f;
  };

  if (type == "none") {
    out.policy = plain{};
  } else if (type == "linear") {
    out.policy = linear{positive_factor()};
  } else if (type == "yarn") {
    yarn y;
    y.factor = positive_factor();
    const auto orig = keys.integer_of(p + "rope.scaling.original_context_length", 1, ropex::detail::max_abs_position);
    y.original_max_position = orig ? *orig : out.max_position;  // llama.cpp: n_ctx_orig_yarn defaults to n_ctx_train
    if (const auto v = keys.number_of(p + "rope.scaling.yarn_beta_fast")) y.beta_fast = *v;
    if (const auto v = keys.number_of(p + "rope.scaling.yarn_beta_slow")) y.beta_slow = *v;
    if (y.beta_fast < 0) keys.fail(p + "rope.scaling.yarn_beta_fast", "must be >= 0");
    if (y.beta_slow < 0) keys.fail(p + "rope.scaling.yarn_beta_slow", "must be >= 0");
    // ggml has no truncate=False path: the correction range is always floor/ceil'ed (docs/formulas.md 2.6).
    y.truncate = true;
    const auto log_mul = keys.number_of(p + "rope.scaling.yarn_log_multiplier");
    const auto attn_factor = keys.number_of(p + "rope.scaling.attn_factor");
    if (log_mul && *log_mul > 0) {
      // DeepSeek: convert_hf_to_gguf writes 0.1 * mscale_all_dim (docs/formulas.md 2.7). HF's
      // cos/sin factor g(s, mscale)/g(s, mscale_all_dim) is 1 for V2/V3 (mscale == mscale_all_dim),
      // and the logits get (1 + yarn_log_multiplier * ln s)^2.
      // Divide in float as llama.cpp does, so a stored 0.1f gives exactly 1 (not 1 + 1.5e-8).
      y.mscale = y.mscale_all_dim = static_cast<double>(static_cast<float>(*log_mul) / 0.1f);
      out.softmax_scale_multiplier = ropex::detail::deepseek_softmax_multiplier(y.factor, y.mscale_all_dim);
      if (attn_factor && *attn_factor != 1.0)
        out.notes.push_back("rope.scaling.attn_factor ignored: yarn_log_multiplier (DeepSeek mscale) takes precedence");
    } else if (attn_factor) {
      // ggml multiplies its own YaRN magnitude 1 + 0.1 ln s by attn_factor (rope_yarn mscale).
      if (!(*attn_factor > 0)) keys.fail(p + "rope.scaling.attn_factor", "must be > 0");
      y.attention_factor = *attn_factor * ropex::detail::yarn_get_mscale(y.factor);
    }
    out.policy = y;
  } else if (type == "longrope") {
    // Filled from the rope_factors_long/short tensors below.
  } else {
    keys.fail(p + "rope.scaling.type", "is not a supported scaling type (\"" + type + "\"); supported: none, linear, yarn");
  }

  // Per-pair factor tensors (ggml freq_factors, applied as theta / factor[i]).
  const std::size_t pairs = static_cast<std::size_t>(rotary_dim / 2);
  auto factors = [&](const char* name) -> const std::vector<double>* {
    const auto it = md.rope_tensors.find(name);
    if (it == md.rope_tensors.end()) return nullptr;
    if (it->second.size() != pairs)
      keys.fail(name, "must have rope.dimension_count/2 = " + std::to_string(pairs) + " entries (got " +
                          std::to_string(it->second.size()) + ")");
    for (std::size_t i = 0; i < it->second.size(); ++i)
      if (!(it->second[i] > 0) || !std::isfinite(it->second[i]))
        keys.fail(std::string(name) + "[" + std::to_string(i) + "]", "must be finite and > 0");
    return &it->second;
  };
  const std::vector<double>* long_factors = factors("rope_factors_long.weight");
  const std::vector<double>* short_factors = factors("rope_factors_short.weight");
  const std::vector<double>* freq = factors("rope_freqs.weight");
  if (long_factors || short_factors || type == "longrope") {
    // LongRoPE (Phi-3): llama.cpp picks long iff n_ctx_seq > n_ctx_orig_yarn; ropex's longrope
    // picks long iff seq_len > original_max_position (the HF rule, docs/formulas.md 2.9).
    if (!long_factors) keys.fail("rope_factors_long.weight", "is required for LongRoPE (rope_factors_short.weight present)");
    if (!short_factors) keys.fail("rope_factors_short.weight", "is required for LongRoPE (rope_factors_long.weight present)");
    if (type != "none" && type != "longrope")
      keys.fail(p + "rope.scaling.type", "\"" + type + "\" cannot be combined with rope_factors_long/short");
    longrope l;
    l.long_factor = *long_factors;
    l.short_factor = *short_factors;
    const auto orig = keys.integer_of(p + "rope.scaling.original_context_length", 1, ropex::detail::max_abs_position);
    if (!orig) keys.fail(p + "rope.scaling.original_context_length", "is required for LongRoPE");
    l.original_max_position = *orig;
    l.factor = static_cast<double>(out.max_position) / static_cast<double>(*orig);
    if (const auto a = keys.number_of(p + "rope.scaling.attn_factor")) {
      if (!(*a > 0)) keys.fail(p + "rope.scaling.attn_factor", "must be > 0");
      l.attention_factor = *a;
    }
    out.rope_type = "longrope";
    out.policy = l;
  } else if (freq) {
    if (type == "none") {
      out.policy = freq_factors{*freq};
      out.rope_type = "freq_factors";
    } else {
      out.notes.push_back("rope_freqs.weight present with rope.scaling.type " + type +
                          ": ggml divides by both; ropex applies the scaling type only");
    }
  } else {
    for (const std::string& name : md.tensor_names)
      if (is_rope_factor_tensor(name))
        out.notes.push_back(name + " present but not read (read_options::read_rope_tensors is off)");
  }

  if (options.layout) {
    out.config.layout = *options.layout;
  } else {
    switch (detail::rope_type_of_arch(arch)) {
      case detail::arch_rope::interleaved: out.config.layout = layout::interleaved; break;
      case detail::arch_rope::half: out.config.layout = layout::half; break;
      case detail::arch_rope::none:
        keys.fail("general.architecture", "\"" + arch + "\" does not use RoPE in llama.cpp");
      case detail::arch_rope::unknown:
        keys.fail("general.architecture",
                  "\"" + arch + "\" has no known RoPE layout; pass import_options::layout");
    }
  }

  detail::add_sliding_window_layers(keys, arch, out);

  // M-RoPE: llama.cpp runs qwen2vl with MROPE (sections) and qwen3vl / qwen3vlmoe with IMROPE
  // (interleaved), both with neox pairing; the 4-entry list keeps unused sections as zeros.
  if (const value* v = keys.find(p + "rope.dimension_sections")) {
    const std::string key = p + "rope.dimension_sections";
    if (v->type != value_type::array || v->array.empty()) keys.fail(key, "must be a non-empty array of integers");
    std::vector<int> sections;
    for (const value& e : v->array) {
      if (!e.is_integer() || !e.integer || *e.integer < 0 || *e.integer > max_dim)
        keys.fail(key, "entries must be integers in [0, " + std::to_string(max_dim) + "]");
      sections.push_back(static_cast<int>(*e.integer));
    }
    while (!sections.empty() && sections.back() == 0) sections.pop_back();
    if (sections.empty()) keys.fail(key, "has no non-zero section");
    const bool interleaved = arch == "qwen3vl" || arch == "qwen3vlmoe";
    out.axes = interleaved ? interleaved_mrope(sections) : mrope(sections);
  }

  ropex::detail::validate_import(out);
  return out;
}

}  // namespace ropex::gguf

namespace ropex {

// GGUF image in memory -> model_rope (ropex::gguf::format_error on any problem).
inline model_rope parse_gguf(const void* data, std::size_t size, const import_options& options = {}) {
  return gguf::to_model_rope(gguf::read_metadata(data, size), options);
}

inline model_rope load_gguf(const std::string& path, const import_options& options = {}) {
  return gguf::to_model_rope(gguf::read_metadata_file(path), options);
}

}  // namespace ropex
