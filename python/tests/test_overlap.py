"""q and k of one call must not share an element (it would be rotated twice): overlapping views are
refused with nothing written, interleaved but disjoint views (slices of one fused qkv tensor) are
rotated. numpy.shares_memory, exact for these small views, is the judge of the randomized test."""

import numpy as np
import pytest

import ropex
from conftest import needs_torch, reference, torch

D = 16


@pytest.fixture
def rope():
    return ropex.RotaryEmbedding(head_dim=D)


def fused(tokens=3, heads=6, dtype=np.float32):
    return np.random.default_rng(0).uniform(-1, 1, (tokens, heads, D)).astype(dtype)


def test_sharing_one_head_is_refused(rope):
    qkv = fused()
    before = qkv.copy()
    with pytest.raises(ValueError, match=r"q and k overlap in memory: rows q\[0, 2\] and k\[0, 0\] share elements"):
        rope.apply(qkv[:, :3], qkv[:, 2:4], [0, 1, 2])
    np.testing.assert_array_equal(qkv, before)


def test_the_same_tensor_twice_is_refused(rope):
    x = fused()
    before = x.copy()
    with pytest.raises(ValueError, match=r"rows q\[0, 0\] and k\[0, 0\] share elements"):
        rope.apply(x, x, [0, 1, 2])
    with pytest.raises(ValueError, match="q and k overlap"):
        rope.apply(x[1:], x[1:, 1:3], [0, 1])
    np.testing.assert_array_equal(x, before)


def test_rows_sharing_part_of_a_head_are_refused(rope):
    # k starts half a head into q's storage: no head is shared whole, some elements are.
    flat = np.random.default_rng(1).uniform(-1, 1, 4 * D).astype(np.float32)
    before = flat.copy()
    q = flat[:2 * D].reshape(1, 2, D)
    k = flat[D + D // 2:D + D // 2 + D].reshape(1, 1, D)
    with pytest.raises(ValueError, match=r"rows q\[0, 1\] and k\[0, 0\]"):
        rope.apply(q, k, [7])
    np.testing.assert_array_equal(flat, before)


def test_interleaved_but_disjoint_slices_are_rotated(rope):
    # The byte ranges of q and k interleave token by token; their elements do not.
    qkv = fused(tokens=5, heads=7)
    before = qkv.copy()
    positions = np.arange(100, 105)
    q, k = rope.apply(qkv[:, :4], qkv[:, 4:6], positions)
    assert np.shares_memory(q, qkv) and np.shares_memory(k, qkv)
    np.testing.assert_allclose(qkv[:, :4], reference(rope, before[:, :4], positions), atol=1e-6)
    np.testing.assert_allclose(qkv[:, 4:6], reference(rope, before[:, 4:6], positions), atol=1e-6)
    np.testing.assert_array_equal(qkv[:, 6], before[:, 6])


def test_alternate_tokens_of_one_tensor(rope):
    x = fused(tokens=6, heads=2)
    before = x.copy()
    rope.apply(x[0::2], x[1::2], [0, 1, 2])
    np.testing.assert_allclose(x[0::2], reference(rope, before[0::2], [0, 1, 2]), atol=1e-6)
    np.testing.assert_allclose(x[1::2], reference(rope, before[1::2], [0, 1, 2]), atol=1e-6)
    with pytest.raises(ValueError, match="overlap"):
        rope.apply(x[0:3], x[2:5], [0, 1, 2])


def test_head_major_fused_qkv_with_a_batch(rope):
    # HF's [batch, heads, seq, head_dim] layout, q and k as head slices seen through transpose.
    batch, heads, seq = 2, 3, 4
    qkv = np.random.default_rng(2).uniform(-1, 1, (batch, 3 * heads, seq, D)).astype(np.float32)
    before = qkv.copy()
    positions = np.arange(seq)
    rope.apply(qkv[:, :heads].transpose(0, 2, 1, 3), qkv[:, heads:2 * heads].transpose(0, 2, 1, 3), positions)
    expected = reference(rope, before[:, :2 * heads].transpose(0, 2, 1, 3), positions).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(qkv[:, :2 * heads], expected, atol=1e-6)
    rotated = qkv.copy()
    with pytest.raises(ValueError, match=r"rows q\[0, 0, 2\] and k\[0, 0, 0\]"):
        rope.apply(qkv[:, :heads].transpose(0, 2, 1, 3), qkv[:, heads - 1:2 * heads - 1].transpose(0, 2, 1, 3),
                   positions)
    np.testing.assert_array_equal(qkv, rotated)


def test_different_token_strides(rope):
    x = fused(tokens=8, heads=4)
    before = x.copy()
    rope.apply(x[:4, 0:2], x[::2, 2:4], [0, 1, 2, 3])  # every other token's last two heads: disjoint
    np.testing.assert_allclose(x[:4, 0:2], reference(rope, before[:4, 0:2], [0, 1, 2, 3]), atol=1e-6)
    np.testing.assert_allclose(x[::2, 2:4], reference(rope, before[::2, 2:4], [0, 1, 2, 3]), atol=1e-6)
    rotated = x.copy()
    with pytest.raises(ValueError, match=r"rows q\[2, 1\] and k\[1, 0\]"):
        rope.apply(x[:4, 0:2], x[::2, 1:3], [0, 1, 2, 3])  # x[2, 1] is in both
    np.testing.assert_array_equal(x, rotated)


def random_view(flat, rng, tokens, heads):
    """A [tokens, heads, D] view of flat at a random offset, token- or head-major, with gaps."""
    head_stride = D + int(rng.integers(0, 3)) * int(rng.choice([1, 5, D]))
    if rng.integers(2):  # token-major
        token_stride = heads * head_stride + int(rng.integers(0, 2)) * int(rng.choice([3, D]))
    else:  # head-major
        token_stride = head_stride
        head_stride = tokens * token_stride + int(rng.integers(0, 2)) * 7
    extent = (tokens - 1) * token_stride + (heads - 1) * head_stride + D
    offset = int(rng.integers(0, flat.size - extent + 1))
    return np.lib.stride_tricks.as_strided(flat[offset:], shape=(tokens, heads, D),
                                           strides=(token_stride * 4, head_stride * 4, 4))


def test_random_layouts_against_numpy_shares_memory(rope):
    rng = np.random.default_rng(3)
    refused = rotated = 0
    for _ in range(400):
        flat = rng.uniform(-1, 1, 1200).astype(np.float32)
        tokens = int(rng.integers(1, 5))
        q = random_view(flat, rng, tokens, int(rng.integers(1, 4)))
        k = random_view(flat, rng, tokens, int(rng.integers(1, 4)))
        q0, k0, flat0 = q.copy(), k.copy(), flat.copy()
        positions = np.arange(tokens) * 1000
        if np.shares_memory(q, k, max_work=None):
            with pytest.raises(ValueError, match="q and k overlap in memory"):
                rope.apply(q, k, positions)
            np.testing.assert_array_equal(flat, flat0)
            refused += 1
        else:
            rope.apply(q, k, positions)
            np.testing.assert_allclose(q, reference(rope, q0, positions), atol=1e-6)
            np.testing.assert_allclose(k, reference(rope, k0, positions), atol=1e-6)
            rotated += 1
    assert refused > 50 and rotated > 50  # both branches were exercised


def test_views_of_separate_arrays_are_not_searched(rope):
    # Far apart in memory: the byte-range test decides at once (a 2-D search over these shapes
    # would still be quick; this pins the behaviour for the common decode call).
    q, k = fused(tokens=1, heads=8), fused(tokens=1, heads=2)
    rope.apply(q, k, [3])


@needs_torch
def test_torch_overlapping_slices_are_refused(rope):
    qkv = torch.randn(4, 6, D)
    before = qkv.clone()
    with pytest.raises(ValueError, match=r"q and k overlap in memory: rows q\[0, 3\] and k\[0, 0\]"):
        rope.apply(qkv[:, :4], qkv[:, 3:5], torch.arange(4))
    assert torch.equal(qkv, before)
    q, k = rope.apply(qkv[:, :4], qkv[:, 4:6], torch.arange(4))
    assert q.data_ptr() == qkv.data_ptr()
    assert not torch.equal(qkv[:, :4], before[:, :4])


# ---- one tensor whose leading dimensions bring rows together ---------------------------------------

def test_batch_stride_inside_a_batch_is_refused(rope):
    storage = np.random.default_rng(4).uniform(-1, 1, 8 * 2 * D).astype(np.float32)
    before = storage.copy()
    row = 2 * D * 4  # bytes of one token (2 heads)
    same = np.lib.stride_tricks.as_strided(storage, shape=(2, 3, 2, D), strides=(row, row, D * 4, 4))
    with pytest.raises(ValueError, match=r"^x has rows that overlap in memory: x\[1, 0, 0\] and x\[0, 1, 0\] share"):
        rope.apply(same, np.arange(6))
    two = np.lib.stride_tricks.as_strided(storage, shape=(2, 3, 2, D), strides=(2 * row, row, D * 4, 4))
    with pytest.raises(ValueError, match=r"x\[0, 2, 0\] and x\[1, 0, 0\] share elements"):
        rope.apply(two, np.arange(3))
    with pytest.raises(ValueError, match=r"^k has rows that overlap in memory"):
        rope.apply(np.zeros((2, 3, 1, D), np.float32), two, np.arange(3))
    np.testing.assert_array_equal(storage, before)


def overlapping_rows(view):
    """Brute force: whether two different rows of view (all but the last axis) share an element."""
    starts = []
    for index in np.ndindex(*view.shape[:-1]):
        starts.append(sum(i * s for i, s in zip(index, view.strides[:-1])) // 4)
    starts.sort()
    return any(b - a < view.shape[-1] for a, b in zip(starts, starts[1:]))


def test_random_batch_strides_against_brute_force(rope):
    rng = np.random.default_rng(5)
    refused = rotated = 0
    for _ in range(300):
        tokens, heads = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        head_stride = D + int(rng.integers(0, 2)) * 3
        token_stride = heads * head_stride + int(rng.integers(0, 2)) * 5
        batch, groups = int(rng.integers(2, 4)), int(rng.integers(1, 3))
        batch_stride = int(rng.choice([D // 2, D, token_stride, 2 * token_stride, tokens * token_stride,
                                       tokens * token_stride + 7]))
        group_stride = batch * batch_stride + int(rng.integers(0, 2)) * batch_stride // 2
        shape = (groups, batch, tokens, heads, D)
        strides = (group_stride, batch_stride, token_stride, head_stride, 1)
        flat = rng.uniform(-1, 1, sum((n - 1) * s for n, s in zip(shape, strides)) + 1).astype(np.float32)
        x = np.lib.stride_tricks.as_strided(flat, shape=shape, strides=[4 * s for s in strides])
        x0, flat0 = x.copy(), flat.copy()
        positions = np.arange(groups * batch * tokens).reshape(groups, batch, tokens)
        if overlapping_rows(x):
            with pytest.raises(ValueError, match="x has rows that overlap in memory"):
                rope.apply(x, positions)
            np.testing.assert_array_equal(flat, flat0)
            refused += 1
        else:
            rope.apply(x, positions)
            np.testing.assert_allclose(x, reference(rope, x0, positions), atol=1e-6)
            rotated += 1
    assert refused > 50 and rotated > 50
