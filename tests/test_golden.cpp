// Golden outputs: every rotation entry point, hashed (FNV-1a over the output bytes) per kernel
// family and storage type, compared with hashes recorded from the kernels as they were when this
// test was written. A refactor of the kernel layer must change no output bit.
//
// Families differ from each other in the last bit of some results (fused multiply-add or not, the
// AVX512_BF16 conversion), so the hashes are recorded per architecture and family: even the
// scalar kernel's bits can depend on the architecture (aarch64 compilers contract a * b + c into
// one fma by default; the scalar rotation rounds its products explicitly since the kernel layer
// was written once, so its aarch64 rows were recorded again then, and now equal the x86 ones for
// most entries). A family with no recorded hash is reported and skipped; set
// ROPEX_GOLDEN_PRINT=1 to print the table rows for the families this machine runs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "catch.hpp"
#include "ropex/onnx.hpp"
#include "ropex/ropex.hpp"

namespace {

using ropex::kernels::isa;

std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ull;

// Deterministic inputs in [-2, 2) with 24 significant bits, independent of the standard library.
template <class T>
std::vector<T> inputs(std::size_t n, std::uint64_t seed) {
  std::vector<T> out(n);
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& v : out) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v = T(static_cast<float>(s >> 40) * 0x1p-22f - 2.0f);
  }
  return out;
}

struct shape {
  int head_dim, rotary_dim;
  ropex::layout pairing;
  bool yarn;
};

// Full and partial rotary, both layouts, a pair count above one 128-pair chunk, odd pair tails.
const std::vector<shape>& shapes() {
  static const std::vector<shape> all = {
      {64, 0, ropex::layout::half, false},         {64, 0, ropex::layout::interleaved, true},
      {96, 54, ropex::layout::half, true},         {96, 54, ropex::layout::interleaved, false},
      {320, 300, ropex::layout::half, false},      {320, 300, ropex::layout::interleaved, true},
      {128, 0, ropex::layout::half, true},         {40, 18, ropex::layout::interleaved, false}};
  return all;
}

ropex::rotary_embedding make_rope(const shape& s) {
  ropex::rope_config cfg{s.head_dim};
  cfg.rotary_dim = s.rotary_dim;
  cfg.layout = s.pairing;
  if (!s.yarn) return ropex::rotary_embedding(cfg, ropex::plain{});
  ropex::yarn y;
  y.factor = 4;
  y.original_max_position = 4096;
  return ropex::rotary_embedding(cfg, y);
}

const std::vector<std::int64_t> positions = {0, 1, 17, 4095, (std::int64_t{1} << 24) + 3, -5, 123456789};
const std::vector<std::int64_t> table_positions = {0, 1, 17, 4095, 3, 2000, 777};
const std::int64_t tokens = static_cast<std::int64_t>(positions.size());
constexpr std::int64_t q_heads = 3, k_heads = 2;

// Runs `body(rope, q, k)` for every shape on fresh inputs (q and k interleaved in one fused
// buffer, as a qkv projection lays them out) and hashes the whole buffer.
template <class T, class Body>
std::uint64_t over_shapes(const Body& body) {
  std::uint64_t h = fnv_offset;
  std::uint64_t seed = 1;
  for (const shape& s : shapes()) {
    const ropex::rotary_embedding rope = make_rope(s);
    const std::int64_t d = s.head_dim, row = (q_heads + k_heads) * d;
    std::vector<T> buf = inputs<T>(static_cast<std::size_t>(tokens * row), seed++);
    ropex::tensor_view<T> q{buf.data(), tokens, q_heads, row, d};
    ropex::tensor_view<T> k{buf.data() + q_heads * d, tokens, k_heads, row, d};
    body(rope, q, k);
    h = fnv1a(buf.data(), buf.size() * sizeof(T), h);
  }
  return h;
}

// Multi-axis shapes: M-RoPE sections and interleaved (full and partial rotary), 2-D vision.
struct axes_shape {
  int head_dim, rotary_dim;
  ropex::layout pairing;
  ropex::position_axes axes;
};

template <class T, class Body>
std::uint64_t over_axes(const Body& body) {
  const std::vector<axes_shape> all = {
      {64, 0, ropex::layout::half, ropex::mrope({8, 12, 12})},
      {96, 64, ropex::layout::interleaved, ropex::mrope({8, 12, 12})},
      {64, 0, ropex::layout::interleaved, ropex::interleaved_mrope({12, 10, 10})},
      {128, 0, ropex::layout::half, ropex::interleaved_mrope({24, 20, 20})},
      {64, 32, ropex::layout::half, ropex::vision_2d()},
      {64, 32, ropex::layout::interleaved, ropex::vision_2d()}};
  std::uint64_t h = fnv_offset;
  std::uint64_t seed = 100;
  for (const axes_shape& s : all) {
    ropex::rope_config cfg{s.head_dim};
    cfg.rotary_dim = s.rotary_dim;
    cfg.layout = s.pairing;
    const ropex::rotary_embedding rope(cfg, ropex::plain{});
    const std::int64_t d = s.head_dim, row = (q_heads + k_heads) * d;
    std::vector<T> buf = inputs<T>(static_cast<std::size_t>(tokens * row), seed++);
    ropex::tensor_view<T> q{buf.data(), tokens, q_heads, row, d};
    ropex::tensor_view<T> k{buf.data() + q_heads * d, tokens, k_heads, row, d};
    const int n_axes = ropex::axis_count(s.axes);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(n_axes * tokens));
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = positions[i % positions.size()] + static_cast<std::int64_t>(i / 3);
    body(rope, q, k, s.axes, ropex::axis_positions{pos.data(), n_axes, 0});
    h = fnv1a(buf.data(), buf.size() * sizeof(T), h);
  }
  return h;
}

// ONNX RotaryEmbedding: 3-D and 4-D input, with and without position_ids, both pairings, partial.
template <class T>
std::uint64_t onnx_cases() {
  std::uint64_t h = fnv_offset;
  std::uint64_t seed = 200;
  const std::int64_t batch = 2, seq = 5, heads = 3;
  for (bool three_d : {false, true})
    for (bool with_ids : {false, true})
      for (bool interleaved : {false, true})
        for (std::int64_t head_size : {std::int64_t{64}, std::int64_t{40}}) {
          const std::int64_t rotary = head_size == 64 ? 0 : 18, half = (rotary == 0 ? head_size : rotary) / 2;
          const std::int64_t max_position = 50;
          std::vector<std::int64_t> shape =
              three_d ? std::vector<std::int64_t>{batch, seq, heads * head_size}
                      : std::vector<std::int64_t>{batch, heads, seq, head_size};
          const std::int64_t rows = with_ids ? max_position : batch * seq;
          std::vector<T> input = inputs<T>(static_cast<std::size_t>(batch * heads * seq * head_size), seed++);
          std::vector<T> cos = inputs<T>(static_cast<std::size_t>(rows * half), seed++);
          std::vector<T> sin = inputs<T>(static_cast<std::size_t>(rows * half), seed++);
          std::vector<std::int64_t> cache_shape =
              with_ids ? std::vector<std::int64_t>{max_position, half} : std::vector<std::int64_t>{batch, seq, half};
          std::vector<std::int64_t> ids(static_cast<std::size_t>(batch * seq));
          for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 7 + 3) % 50);
          ropex::onnx_attributes attributes;
          attributes.interleaved = interleaved;
          attributes.rotary_embedding_dim = rotary;
          attributes.num_heads = three_d ? heads : 0;
          std::vector<T> output(input.size());
          ropex::onnx_rotary_embedding(input.data(), shape, cos.data(), sin.data(), cache_shape,
                                       with_ids ? ids.data() : nullptr, output.data(), attributes);
          h = fnv1a(output.data(), output.size() * sizeof(T), h);
        }
  return h;
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, ropex::float16>) return "float16";
  else return "bfloat16";
}

// The architecture this build runs on, the first column of the recorded rows.
constexpr const char* architecture =
#if defined(__x86_64__)
    "x86_64";
#elif defined(__aarch64__)
    "aarch64";
#else
    "other";
#endif

struct golden_row {
  const char* architecture;
  const char* family;
  const char* type;
  const char* entry;
  std::uint64_t hash;
};

// Recorded on x86-64 with GCC 12 and Clang 14 (scalar, avx2, avx512 with AVX512_BF16): the two
// compilers agree, and avx2 and avx512 agree with each other (both use fused multiply-add). On
// aarch64 (scalar, neon) with GCC 12, cross-compiled and run under qemu.
const golden_row recorded[] = {
#include "golden_hashes.inc"
    {"", "", "", "", 0}};  // end marker

const golden_row* find_row(const std::string& family, const char* type, const std::string& entry) {
  for (const golden_row& r : recorded)
    if (std::strcmp(architecture, r.architecture) == 0 && family == r.family && std::strcmp(type, r.type) == 0 &&
        entry == r.entry)
      return &r;
  return nullptr;
}

template <class T>
std::vector<std::pair<std::string, std::uint64_t>> entry_hashes() {
  using view = ropex::tensor_view<T>;
  using rope_t = ropex::rotary_embedding;
  std::vector<std::pair<std::string, std::uint64_t>> out;
  out.emplace_back("apply", over_shapes<T>([](const rope_t& r, view q, view) { r.apply(q, positions.data()); }));
  out.emplace_back("apply_qk", over_shapes<T>([](const rope_t& r, view q, view k) { r.apply(q, k, positions.data()); }));
  out.emplace_back("apply_inverse",
                   over_shapes<T>([](const rope_t& r, view q, view) { r.apply_inverse(q, positions.data()); }));
  out.emplace_back("shift", over_shapes<T>([](const rope_t& r, view q, view k) {
                     r.shift(q, std::int64_t{-37});
                     r.shift(k, (std::int64_t{1} << 20) + 1);
                   }));
  out.emplace_back("shift_each", over_shapes<T>([](const rope_t& r, view q, view) {
                     const std::vector<std::int64_t> deltas = {3, -1, 0, 100000, -4096, 7, 1 << 25};
                     r.shift_each(q, deltas.data());
                   }));
  out.emplace_back("apply_table", over_shapes<T>([](const rope_t& r, view q, view) {
                     r.apply(q, table_positions.data(), r.make_table(4096));
                   }));
  out.emplace_back("apply_qk_table", over_shapes<T>([](const rope_t& r, view q, view k) {
                     r.apply(q, k, table_positions.data(), r.make_table(4097));
                   }));
  out.emplace_back("apply_contiguous", over_shapes<T>([](const rope_t& r, view q, view) {
                     // The pointer overload over the first q_heads * head_dim channels of each row
                     // treated as whole tokens of one head.
                     r.apply(q.data, 1, q.heads, positions.data() + 4);
                   }));
  using axes_t = ropex::position_axes;
  using pos_t = ropex::axis_positions;
  out.emplace_back("apply_axes", over_axes<T>([](const rope_t& r, view q, view, const axes_t& a, pos_t p) {
                     r.apply(q, a, p);
                   }));
  out.emplace_back("apply_qk_axes", over_axes<T>([](const rope_t& r, view q, view k, const axes_t& a, pos_t p) {
                     r.apply(q, k, a, p);
                   }));
  out.emplace_back("apply_inverse_axes", over_axes<T>([](const rope_t& r, view q, view, const axes_t& a, pos_t p) {
                     r.apply_inverse(q, a, p);
                   }));
  out.emplace_back("onnx", onnx_cases<T>());
  return out;
}

std::vector<isa> families_to_check() { return ropex::kernels::available_isas(); }

template <class T>
void check_type() {
  const bool print = std::getenv("ROPEX_GOLDEN_PRINT") != nullptr;
  for (isa family : families_to_check()) {
    ropex::kernels::forced_isa guard(family);
    // The avx512 family's bfloat16 rotation has two variants (with and without AVX512_BF16).
    std::string name = ropex::kernels::isa_name(family);
    if (family == isa::avx512 && std::is_same_v<T, ropex::bfloat16> && ropex::kernels::has_avx512_bf16())
      name += "_bf16";
    for (const auto& [entry, hash] : entry_hashes<T>()) {
      if (print)
        std::printf("    {\"%s\", \"%s\", \"%s\", \"%s\", 0x%016llxull},\n", architecture, name.c_str(), type_name<T>(),
                    entry.c_str(), static_cast<unsigned long long>(hash));
      const golden_row* row = find_row(name, type_name<T>(), entry);
      if (row == nullptr) {
        WARN("no recorded golden hash for " << architecture << " " << name << " " << type_name<T>() << " " << entry);
        continue;
      }
      INFO(name << " " << type_name<T>() << " " << entry);
      CHECK(hash == row->hash);
    }
  }
}

}  // namespace

TEST_CASE("every entry point reproduces its recorded output bits on every family", "[golden]") {
  check_type<float>();
  check_type<ropex::float16>();
  check_type<ropex::bfloat16>();
}
