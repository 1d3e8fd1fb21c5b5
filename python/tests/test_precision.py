"""The float32-angle error of the HF-style torch computation at large positions, next to ropex's.

HF forms inv_freq and the angles position * inv_freq in float32, so the angle error grows with the
position (about position * 2^-24 radians); ropex forms exact angles. Both are measured against the
float64 reference, on the same float32 inputs."""

import numpy as np
import pytest

import ropex
from conftest import hf_torch_rope, needs_torch, reference, torch

POSITIONS = [1 << 12, 1 << 16, 1 << 20, (1 << 24) - 1]


def max_errors(head_dim=128, base=500000.0):
    """{position: (torch HF-style error, ropex error)}: max absolute error over q [1, 32, 1, head_dim]."""
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, (1, 32, 1, head_dim)).astype(np.float32)
    rope = ropex.RotaryEmbedding(head_dim=head_dim, base=base)
    errors = {}
    for p in POSITIONS:
        exact = reference(rope, q.transpose(0, 2, 1, 3), [[p]]).transpose(0, 2, 1, 3)
        hf = hf_torch_rope(torch.from_numpy(q), torch.tensor([[p]]), base).numpy()
        ours = torch.from_numpy(q.copy())
        rope.apply(ours.transpose(1, 2), torch.tensor([[p]]))
        errors[p] = (float(np.abs(hf - exact).max()), float(np.abs(ours.numpy() - exact).max()))
    return errors


@needs_torch
def test_float32_angles_lose_accuracy_where_ropex_does_not(record_property):
    errors = max_errors()
    for p, (hf, ours) in errors.items():
        record_property(f"position_{p}", f"HF-style float32 {hf:.2e}, ropex {ours:.2e}")
        print(f"position {p:>9}: HF-style float32 angles {hf:.2e}, ropex {ours:.2e}")
        assert ours < 1e-6  # a few float32 ulps of |q| <= 1, at every position
    assert errors[1 << 16][0] > 1e-3
    assert errors[1 << 20][0] > 1e-2
    assert errors[(1 << 24) - 1][0] > 0.5
    assert all(hf > 100 * ours for p, (hf, ours) in errors.items() if p >= 1 << 16)


@pytest.mark.parametrize("position", [1 << 30, (1 << 40) + 12345])
def test_exact_far_beyond_float32_positions(position):
    # Angles reduced exactly. The reference forms the product in extended precision (64-bit mantissa:
    # 2^40 * 2^-64 rad of error); past ~2^44 it would itself be off by more than ropex.
    rope = ropex.RotaryEmbedding(head_dim=16, base=10000.0)
    x = np.random.default_rng(4).uniform(-1, 1, (1, 1, 16)).astype(np.float32)
    theta = np.longdouble(position) * rope.inv_freq.astype(np.longdouble)
    if np.finfo(np.longdouble).nmant < 60 and position > 1 << 40:
        pytest.skip("needs an 80-bit long double for the reference")
    cos, sin = np.cos(theta).astype(np.float64), np.sin(theta).astype(np.float64)
    a, b = x[0, 0, :8].astype(np.float64), x[0, 0, 8:].astype(np.float64)
    expected = np.concatenate([a * cos - b * sin, b * cos + a * sin])
    rope.apply(x, [position])
    np.testing.assert_allclose(x[0, 0], expected, atol=2e-6)
