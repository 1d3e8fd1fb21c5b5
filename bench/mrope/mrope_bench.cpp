// Qwen2-VL-sized M-RoPE prefill against a memory roofline.
//
// Shape: 4096 tokens x 28 heads x head_dim 128, fp32, in place (Qwen2-VL-7B query heads), base
// 1e6. Positions [3][4096] as the Qwen2-VL processor lays them out: 96 text tokens, one 64 x 60
// image (3840 tokens: t fixed, h = row, w = column, offset by the text length), 160 text tokens.
//
// Roofline: the shared in-place `x *= a` pass of bench/roofline.hpp (AVX-512 when the CPU has it)
// over the same buffer with a = 1, i.e. the same bytes read and written, paired with the rotation
// in every iteration (run_paired: rotation timed, then the roofline timed, so both see the same
// machine state). Reported: bytes_per_second of the rotation from its own time (read + write =
// 2 x the buffer), the counter ratio = median over iterations of roofline time / rotation time
// (1.0 = as fast as streaming the buffer once in place) and roofline_GBps, the median roofline
// speed. The floor is ratio >= 0.85. Run with
//   --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   --benchmark_enable_random_interleaving=true
// and read the medians.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include <ropex/ropex.hpp>
#include <ropex/axes.hpp>

#include "../roofline.hpp"

namespace {

constexpr std::int64_t kTokens = 4096, kHeads = 28;
constexpr int kHeadDim = 128;

std::vector<std::int64_t> qwen2_vl_positions() {
  // HF Qwen2VLModel.get_rope_index: text tokens count up on all three axes; an image's tokens
  // get t = h = w start + (0, row, column) after the text before it; text after the image
  // resumes at max(previous) + 1.
  std::vector<std::int64_t> p(static_cast<std::size_t>(3 * kTokens));
  auto set = [&](std::int64_t t, std::int64_t a, std::int64_t b, std::int64_t c) {
    p[static_cast<std::size_t>(t)] = a;
    p[static_cast<std::size_t>(kTokens + t)] = b;
    p[static_cast<std::size_t>(2 * kTokens + t)] = c;
  };
  std::int64_t t = 0;
  for (; t < 96; ++t) set(t, t, t, t);
  const std::int64_t start = 96, rows = 64, cols = 60;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c, ++t) set(t, start, start + r, start + c);
  std::int64_t next = start + (rows > cols ? rows : cols);
  for (; t < kTokens; ++t, ++next) set(t, next, next, next);
  return p;
}

// 64-byte aligned (bench/roofline.hpp), as tensor allocators give.
struct buffers {
  ropex_bench::aligned_buffer<float> x{static_cast<std::size_t>(kTokens * kHeads * kHeadDim)};
  std::vector<std::int64_t> positions = qwen2_vl_positions();
  buffers() {
    std::uint32_t s = 12345;
    for (std::size_t i = 0; i < x.size(); ++i) {
      s = s * 1664525u + 1013904223u;
      x[i] = static_cast<float>(s >> 8) * 0x1.0p-24f - 0.5f;
    }
  }
};

buffers& shared_buffers() {
  static buffers b;
  return b;
}

// Runs `rotate` paired with the roofline over the same buffer (a = 1 keeps the values exact).
template <class Rotate>
void run_against_roofline(benchmark::State& state, Rotate rotate) {
  buffers& b = shared_buffers();
  const double bytes = 2.0 * static_cast<double>(b.x.size() * sizeof(float));
  const float a = ropex_bench::runtime_one();
  ropex_bench::run_paired(state, bytes, bytes, 1, [&] { rotate(b); },
                          [&] { ropex_bench::scale(b.x.data(), b.x.size(), a); });
  state.SetLabel(ropex::kernel_isa());
}

const ropex::rotary_embedding& rope_for(ropex::layout pairing) {
  static const ropex::rotary_embedding half(ropex::rope_config{kHeadDim, 0, 1000000.0, ropex::layout::half}, ropex::plain{});
  static const ropex::rotary_embedding inter(ropex::rope_config{kHeadDim, 0, 1000000.0, ropex::layout::interleaved},
                                             ropex::plain{});
  return pairing == ropex::layout::half ? half : inter;
}

// Qwen2-VL / Qwen2.5-VL M-RoPE, mrope_section 16/24/24; arg 0 = half layout, 1 = interleaved.
void BM_mrope_sections(benchmark::State& state) {
  const auto& re = rope_for(state.range(0) == 0 ? ropex::layout::half : ropex::layout::interleaved);
  const ropex::position_axes axes = ropex::mrope({16, 24, 24});
  run_against_roofline(state, [&](buffers& b) {
    ropex::apply_multi_axis(re.config(), re.freqs(), b.x.data(), kTokens, kHeads, axes,
                            ropex::axis_positions{b.positions.data(), 3});
  });
}

// Qwen3-VL interleaved M-RoPE, mrope_section 24/20/20 (cos/sin gathered and scattered per token).
void BM_mrope_interleaved_assignment(benchmark::State& state) {
  const auto& re = rope_for(state.range(0) == 0 ? ropex::layout::half : ropex::layout::interleaved);
  const ropex::position_axes axes = ropex::interleaved_mrope({24, 20, 20});
  run_against_roofline(state, [&](buffers& b) {
    ropex::apply_multi_axis(re.config(), re.freqs(), b.x.data(), kTokens, kHeads, axes,
                            ropex::axis_positions{b.positions.data(), 3});
  });
}

// 1-D RoPE over the same buffer (the t stream as positions), for comparison.
void BM_rope_1d(benchmark::State& state) {
  const auto& re = rope_for(state.range(0) == 0 ? ropex::layout::half : ropex::layout::interleaved);
  run_against_roofline(state, [&](buffers& b) { re.apply(b.x.data(), kTokens, kHeads, b.positions.data()); });
}

}  // namespace

BENCHMARK(BM_mrope_sections)->ArgName("interleaved_layout")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mrope_interleaved_assignment)->ArgName("interleaved_layout")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_rope_1d)->ArgName("interleaved_layout")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
