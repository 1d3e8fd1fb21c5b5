// Qwen2-VL-sized M-RoPE prefill against a memory roofline (issue 6).
//
// Shape: 4096 tokens x 28 heads x head_dim 128, fp32, in place (Qwen2-VL-7B query heads), base
// 1e6. Positions [3][4096] as the Qwen2-VL processor lays them out: 96 text tokens, one 64 x 60
// image (3840 tokens: t fixed, h = row, w = column, offset by the text length), 160 text tokens.
//
// Roofline: an in-place `x *= a` over the same buffer, i.e. the same bytes read and written, timed
// in the same iterations (interleaved with the rotation, so both see the same machine state).
// Reported: bytes_per_second of the rotation (read + write = 2 x the buffer) and the counter
// roofline_ratio = roofline time / rotation time (1.0 = as fast as streaming the buffer once).
// The floor is roofline_ratio >= 0.85. Run with
//   --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// and read the medians.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include <ropex/ropex.hpp>
#include <ropex/axes.hpp>

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

struct buffers {
  std::vector<float> x = std::vector<float>(static_cast<std::size_t>(kTokens * kHeads * kHeadDim));
  std::vector<std::int64_t> positions = qwen2_vl_positions();
  buffers() {
    std::uint32_t s = 12345;
    for (float& v : x) {
      s = s * 1664525u + 1013904223u;
      v = static_cast<float>(s >> 8) * 0x1.0p-24f - 0.5f;
    }
  }
};

buffers& shared_buffers() {
  static buffers b;
  return b;
}

// The roofline: one read and one write of every float. Alternating 0.5 and 2 keeps the values
// exact; `a` comes through a volatile so the multiply cannot be folded away.
volatile float g_scale_a = 0.5f, g_scale_b = 2.0f;
void scale_in_place(std::vector<float>& x, bool first) {
  const float a = first ? g_scale_a : g_scale_b;
  float* d = x.data();
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i) d[i] *= a;
  benchmark::ClobberMemory();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `rotate` per iteration (manual time) with a roofline pass timed beside it.
template <class Rotate>
void run_against_roofline(benchmark::State& state, Rotate rotate) {
  buffers& b = shared_buffers();
  double rotate_seconds = 0, roofline_seconds = 0;
  bool flip = true;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    scale_in_place(b.x, flip);
    flip = !flip;
    roofline_seconds += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    rotate(b);
    benchmark::ClobberMemory();
    const double s = seconds_since(t0);
    rotate_seconds += s;
    state.SetIterationTime(s);
  }
  const double bytes = 2.0 * static_cast<double>(b.x.size() * sizeof(float));
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["roofline_GBps"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()) / roofline_seconds / 1e9);
  state.counters["roofline_ratio"] = benchmark::Counter(roofline_seconds / rotate_seconds);
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
