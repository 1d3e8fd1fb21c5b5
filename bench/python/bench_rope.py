"""ropex from Python against Hugging Face's RoPE code in PyTorch, one thread, float32.

    PYTHONPATH=<build>/python python3 bench/python/bench_rope.py [--quick]

Shapes: (a) prefill 4096 tokens x 32 heads x 128, decode 1 x 32 x 128.
  ropex            rope.apply(x, positions) on a torch tensor, in place (DLPack, no copy)
  HF full          LlamaRotaryEmbedding.forward (cos/sin from position_ids, float32 angles) +
                   apply_rotary_pos_emb on q [1, heads, tokens, dim]
  HF rotate only   q * cos + rotate_half(q) * sin with cos/sin already computed
  roofline         x.mul_(a) in place on the same tensor (one read and one write, like RoPE),
                   timed right after each ropex call: the ratio is the median of per-iteration
                   roofline/ropex time ratios (1.0 = at the memory roofline)
Decode also reports the per-call overhead: a call on a tensor with 0 heads (everything but the
angles and the rotation: argument parsing, reading x and positions, checks, GIL release). Each
decode figure is given twice, as wall time and as the process's CPU time per call; on a loaded
machine the wall time also counts the time the process waited for a core, the CPU time does not.
Medians; on a shared machine expect run-to-run spread.
"""

import argparse
import statistics
import sys
import time
import timeit

try:
    import torch
except ImportError:
    print("this benchmark needs PyTorch (Debian: python3-torch)")
    sys.exit(77)  # CTest's "skipped"

import ropex


def hf_inv_freq(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def hf_cos_sin(inv_freq, position_ids):
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    freqs = (inv_freq_expanded @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply(q, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin


def hf_full(q, inv_freq, position_ids):
    cos, sin = hf_cos_sin(inv_freq, position_ids)
    return hf_apply(q, cos, sin)


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_call_seconds(fn, calls, repeats=7, timer=time.perf_counter):
    return statistics.median(timeit.repeat(fn, number=calls, repeat=repeats, timer=timer)) / calls


def prefill(rope, tokens, heads, dim, repeats):
    x = torch.randn(tokens, heads, dim)
    positions = torch.arange(tokens)
    ratios, ropex_times = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        rope.apply(x, positions)
        middle = time.perf_counter()
        x.mul_(1.0)
        end = time.perf_counter()
        ropex_times.append(middle - start)
        ratios.append((end - middle) / (middle - start))
    q = torch.randn(1, heads, tokens, dim)
    position_ids = positions[None, :]
    inv_freq = hf_inv_freq(rope.base, dim)
    cos, sin = hf_cos_sin(inv_freq, position_ids)
    full = median_seconds(lambda: hf_full(q, inv_freq, position_ids), max(3, repeats // 3))
    rotate = median_seconds(lambda: hf_apply(q, cos, sin), max(3, repeats // 3))
    head_major = median_seconds(lambda: rope.apply(q[0].transpose(0, 1), positions), repeats)
    return statistics.median(ropex_times), statistics.median(ratios), full, rotate, head_major


def decode(rope, heads, dim, calls):
    x = torch.randn(1, heads, dim)
    empty = torch.randn(1, 0, dim)
    position = torch.tensor([5000])
    q = torch.randn(1, heads, 1, dim)
    position_ids = position[None, :]
    inv_freq = hf_inv_freq(rope.base, dim)
    cos, sin = hf_cos_sin(inv_freq, position_ids)
    cases = {
        "ropex (whole call)": (lambda: rope.apply(x, position), calls),
        "ropex, 0 heads (overhead)": (lambda: rope.apply(empty, position), calls),
        "ropex, int position": (lambda: rope.apply(x, 5000), calls),
        "HF full": (lambda: hf_full(q, inv_freq, position_ids), calls // 10),
        "HF rotate only": (lambda: hf_apply(q, cos, sin), calls // 10),
    }
    return {name: (per_call_seconds(fn, n), per_call_seconds(fn, n, timer=time.process_time))
            for name, (fn, n) in cases.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke test)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats, calls = (5, 2000) if args.quick else (21, 20000)
    rope = ropex.RotaryEmbedding(head_dim=128, base=500000.0)
    print(f"ropex {ropex.__version__} (kernel {ropex.kernel_isa()}), torch {torch.__version__}, 1 thread")

    t, ratio, full, rotate, head_major = prefill(rope, 4096, 32, 128, repeats)
    gbps = 2 * 4096 * 32 * 128 * 4 / t / 1e9
    print("\n(a) prefill 4096 x 32 x 128 float32 (64 MiB)")
    print(f"  ropex rope.apply (token-major)   {t * 1e3:8.2f} ms  {gbps:5.1f} GB/s  roofline ratio {ratio:.2f}")
    print(f"  ropex on HF's [1, heads, seq, d]  {head_major * 1e3:8.2f} ms  (transposed view, head-major)")
    print(f"  HF full (cos/sin + rotate)       {full * 1e3:8.2f} ms  ({full / t:.0f}x ropex)")
    print(f"  HF rotate only                   {rotate * 1e3:8.2f} ms  ({rotate / t:.0f}x ropex)")

    d = decode(rope, 32, 128, calls)
    print("\ndecode 1 x 32 x 128 float32, per call      wall       CPU")
    for name, (wall, cpu) in d.items():
        print(f"  {name:<28} {wall * 1e6:8.2f} us {cpu * 1e6:6.2f} us")
    ratio = d["HF full"][1] / d["ropex (whole call)"][1]
    print(f"  HF full / ropex (CPU time): {ratio:.1f}x")


if __name__ == "__main__":
    main()
