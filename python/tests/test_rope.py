"""RotaryEmbedding against the float64 reference: every policy and layout, storage types, zero-copy,
strided views (fused qkv, head-major, batch dimensions), inverse and shift."""

import numpy as np
import pytest

import ropex
from conftest import DLPackProducer, needs_torch, reference, reference_frequencies, torch

# |x| <= 1; float32 results are within a few float ulps of the exact rotation (docs: Accuracy).
F32_TOLERANCE = 2e-6

POLICIES = [
    ropex.Plain(),
    ropex.Linear(factor=4.0),
    ropex.NTK(factor=8.0),
    ropex.DynamicNTK(factor=2.0, max_position=2048),
    ropex.Yarn(factor=4.0, original_max_position=32768),
    ropex.Yarn(factor=40.0, original_max_position=4096, mscale=1.0, mscale_all_dim=1.0),
    ropex.Yarn(factor=32.0, original_max_position=4096, beta_fast=32.0, beta_slow=1.0, truncate=False),
    ropex.Llama3(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position=8192),
    ropex.LongRoPE(short_factor=[1.0 + 0.05 * i for i in range(32)], long_factor=[1.0 + 0.5 * i for i in range(32)],
                   factor=32.0, original_max_position=4096),
]


def random_x(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_policy_matches_reference(policy, layout):
    base = 1e6 if isinstance(policy, ropex.Yarn) else 10000.0
    rope = ropex.RotaryEmbedding(head_dim=64, policy=policy, base=base, layout=layout, seq_len=8192)
    inv, m = reference_frequencies(policy, 64, base, 8192)
    np.testing.assert_allclose(rope.inv_freq, inv, rtol=1e-12)
    assert rope.attention_factor == pytest.approx(m, rel=1e-12)
    x = random_x((9, 3, 64))
    positions = np.array([0, 1, 2, 17, 1000, 4095, 4096, 65535, 1 << 20])
    expected = reference(rope, x, positions)
    rope.apply(x, positions)
    np.testing.assert_allclose(x, expected, rtol=0, atol=F32_TOLERANCE * max(1.0, m))


def test_inv_freq_is_float64_numpy():
    rope = ropex.RotaryEmbedding(head_dim=128, policy=ropex.Yarn(factor=4.0, original_max_position=32768), base=1e6)
    assert isinstance(rope.inv_freq, np.ndarray)
    assert rope.inv_freq.dtype == np.float64 and rope.inv_freq.shape == (64,)
    assert rope.attention_factor == pytest.approx(1.1386294361, abs=1e-10)
    assert isinstance(rope.attention_factor, float)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_partial_rotary_passes_the_rest_through(layout):
    rope = ropex.RotaryEmbedding(head_dim=80, rotary_dim=32, policy=ropex.Yarn(factor=8.0), layout=layout)
    assert rope.rotary_dim == 32 and rope.inv_freq.shape == (16,)
    x = random_x((5, 2, 80))
    untouched = x[..., 32:].copy()
    positions = np.arange(5) * 999
    expected = reference(rope, x[..., :32], positions)
    rope.apply(x, positions)
    np.testing.assert_array_equal(x[..., 32:], untouched)  # not even multiplied by the attention factor
    np.testing.assert_allclose(x[..., :32], expected, atol=F32_TOLERANCE * 2)


def test_large_positions_stay_exact():
    rope = ropex.RotaryEmbedding(head_dim=128, base=500000.0)
    positions = np.array([(1 << 24) - 1, 1 << 24, (1 << 24) + 1, 123456789], dtype=np.int64)
    x = random_x((4, 2, 128))
    expected = reference(rope, x, positions)
    rope.apply(x, positions)
    np.testing.assert_allclose(x, expected, atol=F32_TOLERANCE)


def test_float16_numpy():
    rope = ropex.RotaryEmbedding(head_dim=64, policy=ropex.Linear(2.0))
    x = random_x((6, 4, 64), dtype=np.float16)
    positions = np.arange(6) * 100
    expected = reference(rope, x.astype(np.float64), positions)
    rope.apply(x, positions)
    assert x.dtype == np.float16
    np.testing.assert_allclose(x.astype(np.float64), expected, atol=1e-3)  # one half ulp of fp16 at 1


def test_bfloat16_through_dlpack_without_torch():
    # bfloat16 bits held in a uint16 array, exported as DLPack bfloat16 (code 4).
    values = random_x((3, 2, 32))
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)  # truncation: exact bfloat16 inputs
    exact_inputs = (bits.astype(np.uint32) << 16).view(np.float32)
    producer = DLPackProducer(bits, code=4, bits=16)
    rope = ropex.RotaryEmbedding(head_dim=32)
    positions = [5, 600, 70000]
    rope.apply(producer, positions)
    result = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_allclose(result, reference(rope, exact_inputs, positions), atol=8e-3)


def test_zero_copy_numpy_view_of_a_larger_buffer():
    storage = random_x((10, 4, 64))
    before = storage.copy()
    view = storage[2:5]  # a view: rotating it must change `storage` itself
    rope = ropex.RotaryEmbedding(head_dim=64)
    returned = rope.apply(view, [1, 2, 3])
    assert returned is view
    np.testing.assert_allclose(storage[2:5], reference(rope, before[2:5], [1, 2, 3]), atol=F32_TOLERANCE)
    np.testing.assert_array_equal(storage[:2], before[:2])
    np.testing.assert_array_equal(storage[5:], before[5:])


def test_fused_qkv_slices_are_rotated_in_place():
    tokens, heads, kv_heads, d = 7, 8, 2, 64
    qkv = random_x((tokens, heads + 2 * kv_heads, d))
    before = qkv.copy()
    q, k, v = qkv[:, :heads], qkv[:, heads:heads + kv_heads], qkv[:, heads + kv_heads:]
    rope = ropex.RotaryEmbedding(head_dim=d, policy=ropex.Llama3())
    positions = np.arange(tokens) + 8000
    rope.apply(q, k, positions)
    np.testing.assert_allclose(qkv[:, :heads], reference(rope, before[:, :heads], positions), atol=F32_TOLERANCE)
    np.testing.assert_allclose(qkv[:, heads:heads + kv_heads],
                               reference(rope, before[:, heads:heads + kv_heads], positions), atol=F32_TOLERANCE)
    np.testing.assert_array_equal(v, before[:, heads + kv_heads:])


def test_head_major_tensor_through_a_transposed_view():
    batch, heads, tokens, d = 2, 3, 5, 32
    x = random_x((batch, heads, tokens, d))  # the usual [batch, heads, seq, dim] attention layout
    before = x.copy()
    rope = ropex.RotaryEmbedding(head_dim=d)
    positions = np.array([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])
    rope.apply(x.transpose(0, 2, 1, 3), positions)  # [batch, tokens, heads, dim] view, no copy
    expected = reference(rope, before.transpose(0, 2, 1, 3), positions).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(x, expected, atol=F32_TOLERANCE)


@pytest.mark.parametrize("shape", [(2, 3, 4, 2, 32), (1, 6, 2, 32), (3, 1, 2, 32)])
def test_leading_dimensions_fold_into_tokens(shape):
    x = random_x(shape)
    before = x.copy()
    positions = np.arange(int(np.prod(shape[:-2]))).reshape(shape[:-2]) * 7
    rope = ropex.RotaryEmbedding(head_dim=32, policy=ropex.NTK(4.0))
    rope.apply(x, positions)
    np.testing.assert_allclose(x, reference(rope, before, positions), atol=F32_TOLERANCE)


def test_positions_can_repeat_over_leading_dimensions():
    x = random_x((3, 4, 2, 32))
    before = x.copy()
    rope = ropex.RotaryEmbedding(head_dim=32)
    rope.apply(x, [5, 6, 7, 8])  # x.shape[-3] positions, the same for each of the 3 sequences
    np.testing.assert_allclose(x, reference(rope, before, np.array([5, 6, 7, 8])), atol=F32_TOLERANCE)


def test_non_contiguous_batch_with_broadcast_positions():
    storage = random_x((4, 6, 3, 32))
    x = storage[::2, 1:5]  # strided in batch and tokens
    before = x.copy()
    rope = ropex.RotaryEmbedding(head_dim=32, layout="interleaved")
    rope.apply(x, np.array([3, 1, 4, 1]))
    np.testing.assert_allclose(storage[::2, 1:5], reference(rope, before, np.array([3, 1, 4, 1])), atol=F32_TOLERANCE)


@pytest.mark.parametrize("positions", [np.array([9]), [9], 9, (9,), np.array([9], dtype=np.int32), np.array([[9]])])
def test_positions_accepted_forms(positions):
    x = random_x((1, 2, 16))
    before = x.copy()
    rope = ropex.RotaryEmbedding(head_dim=16)
    rope.apply(x, positions)
    np.testing.assert_allclose(x, reference(rope, before, [9]), atol=F32_TOLERANCE)


def test_gqa_q_and_k_with_different_head_counts():
    q, k = random_x((4, 8, 64), 1), random_x((4, 2, 64), 2)
    q0, k0 = q.copy(), k.copy()
    rope = ropex.RotaryEmbedding(head_dim=64, policy=ropex.Yarn(factor=4.0, original_max_position=32768), base=1e6)
    out_q, out_k = rope.apply(q, k, np.array([0, 5, 50000, 100000]))
    assert out_q is q and out_k is k
    np.testing.assert_allclose(q, reference(rope, q0, [0, 5, 50000, 100000]), atol=3e-6)
    np.testing.assert_allclose(k, reference(rope, k0, [0, 5, 50000, 100000]), atol=3e-6)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_inverse_undoes_apply(layout):
    rope = ropex.RotaryEmbedding(head_dim=64, policy=ropex.Yarn(factor=4.0), layout=layout)
    x = random_x((5, 3, 64))
    x0 = x.copy()
    positions = np.array([0, 1, 1000, 70000, 1 << 22])
    rope.apply(x, positions)
    rope.apply_inverse(x, positions)
    np.testing.assert_allclose(x, x0, atol=4e-6)


def test_shift_equals_rotating_by_the_delta_without_a_second_factor():
    rope = ropex.RotaryEmbedding(head_dim=64, policy=ropex.Yarn(factor=4.0))
    keys = random_x((6, 2, 64))
    shifted = keys.copy()
    rope.apply(keys, np.arange(6) + 100)
    rope.apply(shifted, np.arange(6) + 100 - 37)
    rope.shift(shifted, 37)
    np.testing.assert_allclose(shifted, keys, atol=4e-6)
    assert rope.shift(keys, 0) is keys


def test_apply_rope_one_shot():
    x = random_x((3, 2, 64))
    expected = x.copy()
    policy = ropex.Yarn(factor=4.0, original_max_position=32768)
    ropex.RotaryEmbedding(head_dim=64, policy=policy, base=1e6, layout="interleaved").apply(expected, [1, 2, 3])
    out = ropex.apply_rope(x, [1, 2, 3], head_dim=64, policy=policy, base=1e6, layout="interleaved")
    assert out is x
    np.testing.assert_array_equal(x, expected)
    ropex.apply_rope(x, [1, 2, 3])  # head_dim from x, plain policy
    assert np.isfinite(x).all()


def test_dynamic_ntk_and_longrope_follow_seq_len():
    dyn = ropex.DynamicNTK(factor=2.0, max_position=2048)
    short = ropex.RotaryEmbedding(head_dim=64, policy=dyn, seq_len=1000)
    long = ropex.RotaryEmbedding(head_dim=64, policy=dyn, seq_len=8192)
    np.testing.assert_allclose(short.inv_freq, ropex.RotaryEmbedding(head_dim=64).inv_freq)
    assert long.inv_freq[-1] < short.inv_freq[-1]
    lr = POLICIES[-1]
    assert not np.allclose(ropex.RotaryEmbedding(head_dim=64, policy=lr, seq_len=4096).inv_freq,
                           ropex.RotaryEmbedding(head_dim=64, policy=lr, seq_len=4097).inv_freq)


def test_empty_tensors_are_fine():
    rope = ropex.RotaryEmbedding(head_dim=32)
    rope.apply(np.zeros((0, 4, 32), np.float32), np.zeros(0, np.int64))
    rope.apply(np.zeros((3, 0, 32), np.float32), [1, 2, 3])


def test_repr_and_properties():
    rope = ropex.RotaryEmbedding(head_dim=128, policy=ropex.Yarn(factor=4.0, original_max_position=32768), base=1e6)
    text = repr(rope)
    for part in ["head_dim=128", "Yarn(factor=4.0", "original_max_position=32768", "base=1000000.0",
                 "rotary_dim=128", "layout='half'", "attention_factor=1.13862943611"]:
        assert part in text
    assert rope.head_dim == 128 and rope.base == 1e6 and rope.layout == "half" and rope.seq_len == 0
    assert rope.policy == ropex.Yarn(factor=4.0, original_max_position=32768)
    assert ropex.kernel_isa() in ("scalar", "avx2", "avx512", "neon")


def test_the_gil_is_released_during_the_kernel():
    # While one thread rotates 128 MiB, this thread keeps running Python: it timestamps its loop, and
    # some stamps must fall inside the call. A long switch interval keeps the interpreter from
    # handing the GIL over on its own, so with the GIL held for the call no stamp could. On a loaded
    # machine this thread may not get a core during one call, so up to five calls are tried: with
    # the GIL held none of them could see a stamp inside.
    import sys
    import threading
    import time
    rope = ropex.RotaryEmbedding(head_dim=128)
    x = np.ones((8192, 32, 128), np.float32)
    positions = np.arange(8192)

    def stamps_inside_one_call():
        started = threading.Event()
        call = []

        def rotate():
            started.set()
            begin = time.perf_counter()
            rope.apply(x, positions)
            call.extend((begin, time.perf_counter()))

        worker = threading.Thread(target=rotate)
        worker.start()
        started.wait()
        stamps = []
        while worker.is_alive():
            stamps.append(time.perf_counter())
        worker.join()
        return sum(call[0] < t < call[1] for t in stamps), 1e3 * (call[1] - call[0])

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    try:
        for tries in range(1, 6):
            inside, ms = stamps_inside_one_call()
            if inside > 10:
                break
    finally:
        sys.setswitchinterval(interval)
    assert inside > 10, f"{inside} steps of this thread ran during a {ms:.1f} ms call ({tries} calls tried)"


def test_calls_from_threads_give_the_same_result():
    import threading
    rope = ropex.RotaryEmbedding(head_dim=128)
    xs = [random_x((512, 8, 128), seed) for seed in range(2)]
    expected = [reference(rope, x, np.arange(512)) for x in xs]
    threads = [threading.Thread(target=rope.apply, args=(x, np.arange(512))) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, e in zip(xs, expected):
        np.testing.assert_allclose(x, e, atol=F32_TOLERANCE)


# ---- PyTorch --------------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("dtype,tolerance", [("float32", F32_TOLERANCE), ("float16", 1e-3), ("bfloat16", 8e-3)])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_torch_dtypes_in_place(dtype, tolerance, layout):
    torch_dtype = getattr(torch, dtype)
    x = torch.from_numpy(random_x((2, 5, 4, 64))).to(torch_dtype)
    before = x.to(torch.float64).numpy()
    pointer = x.data_ptr()
    rope = ropex.RotaryEmbedding(head_dim=64, policy=ropex.Yarn(factor=4.0), layout=layout)
    positions = torch.arange(10).reshape(2, 5) * 1000
    assert rope.apply(x, positions) is x
    assert x.data_ptr() == pointer and x.dtype == torch_dtype
    np.testing.assert_allclose(x.to(torch.float64).numpy(), reference(rope, before, positions.numpy()),
                               atol=tolerance * rope.attention_factor)


@needs_torch
def test_torch_fused_qkv_from_a_linear_layer():
    torch.manual_seed(0)
    tokens, heads, kv_heads, d = 6, 4, 2, 32
    proj = torch.nn.Linear(64, (heads + 2 * kv_heads) * d, bias=False)
    with torch.no_grad():
        qkv = proj(torch.randn(tokens, 64)).view(tokens, heads + 2 * kv_heads, d)
    q, k = qkv[:, :heads], qkv[:, heads:heads + kv_heads]
    q0, k0 = q.double().numpy().copy(), k.double().numpy().copy()
    rope = ropex.RotaryEmbedding(head_dim=d)
    rope.apply(q, k, torch.arange(tokens))
    np.testing.assert_allclose(q.double().numpy(), reference(rope, q0, np.arange(tokens)), atol=1e-5)
    np.testing.assert_allclose(k.double().numpy(), reference(rope, k0, np.arange(tokens)), atol=1e-5)


@needs_torch
def test_torch_head_major_matches_hf_at_small_positions():
    # [batch, heads, seq, dim] as HF's attention holds it; ropex rotates the transposed view in place.
    torch.manual_seed(1)
    q = torch.randn(2, 4, 16, 64)
    position_ids = torch.arange(16).repeat(2, 1)
    from conftest import hf_torch_rope
    expected = hf_torch_rope(q, position_ids, 10000.0)
    ropex.RotaryEmbedding(head_dim=64).apply(q.transpose(1, 2), position_ids)
    torch.testing.assert_close(q, expected, atol=2e-5, rtol=0)


@needs_torch
def test_torch_noncontiguous_last_dim_and_grad_are_refused():
    rope = ropex.RotaryEmbedding(head_dim=32)
    x = torch.randn(4, 2, 64)[..., ::2]
    with pytest.raises(ValueError, match="contiguous in its last dimension"):
        rope.apply(x, torch.arange(4))
    y = torch.randn(4, 2, 32, requires_grad=True)
    with pytest.raises(ValueError, match="requires grad"):
        rope.apply(y, torch.arange(4))
    with torch.no_grad():
        z = y.detach().clone()
        rope.apply(z, torch.arange(4))  # detached: fine


@needs_torch
def test_torch_expanded_tensor_is_refused():
    rope = ropex.RotaryEmbedding(head_dim=32)
    x = torch.randn(1, 3, 2, 32).expand(4, 3, 2, 32)  # stride 0 in the batch dimension
    before = x.clone()
    with pytest.raises(ValueError, match="stride 0"):
        rope.apply(x, torch.arange(3))
    assert torch.equal(x, before)


@needs_torch
@pytest.mark.parametrize("count", [1, 16, 17, 100])
def test_torch_positions_short_and_long(count):
    # Up to 16 int64 positions are copied at once, more are read in place: both give the same.
    rope = ropex.RotaryEmbedding(head_dim=32)
    x = torch.from_numpy(random_x((count, 2, 32)))
    before = x.double().numpy().copy()
    positions = torch.arange(count) * 977 + 5
    rope.apply(x, positions)
    np.testing.assert_allclose(x.double().numpy(), reference(rope, before, positions.numpy()), atol=F32_TOLERANCE)
    assert torch.equal(positions, torch.arange(count) * 977 + 5)  # read, not written


@needs_torch
def test_torch_strided_and_offset_positions():
    rope = ropex.RotaryEmbedding(head_dim=32)
    storage = torch.arange(100) * 31
    for positions in (storage[::3][:20], storage[7:27], storage[40:42].view(2, 1)[:, 0]):
        x = torch.from_numpy(random_x((positions.numel(), 1, 32)))
        before = x.double().numpy().copy()
        rope.apply(x, positions)
        np.testing.assert_allclose(x.double().numpy(), reference(rope, before, positions.numpy()),
                                   atol=F32_TOLERANCE)


@needs_torch
def test_torch_views_with_a_storage_offset_and_a_negative_view():
    rope = ropex.RotaryEmbedding(head_dim=32)
    base = torch.from_numpy(random_x((5, 3, 32)))
    before = base.double().numpy().copy()
    rope.apply(base[2:, 1:], torch.arange(3))  # data_ptr past the start of the storage
    np.testing.assert_allclose(base[2:, 1:].double().numpy(), reference(rope, before[2:, 1:], np.arange(3)),
                               atol=F32_TOLERANCE)
    np.testing.assert_array_equal(base[:2].numpy(), before[:2].astype(np.float32))
    # A negated view shares memory with its base; a rotation is linear, so rotating the memory
    # rotates the view.
    x = torch.from_numpy(random_x((2, 1, 32)))
    negated = x._neg_view()
    expected = reference(rope, -x.double().numpy(), [3, 4])
    rope.apply(negated, [3, 4])
    np.testing.assert_allclose(negated.double().numpy(), expected, atol=F32_TOLERANCE)


@needs_torch
def test_torch_sparse_and_mismatched_tensors_are_named():
    rope = ropex.RotaryEmbedding(head_dim=32)
    with pytest.raises(ValueError, match=r"^x must be a dense \(strided\) tensor \(got torch.sparse_coo\)$"):
        rope.apply(torch.zeros(2, 1, 32).to_sparse(), [0, 1])
    with pytest.raises(ValueError, match=r"^positions must be a dense \(strided\) tensor"):
        rope.apply(torch.zeros(2, 1, 32), torch.arange(2).to_sparse())
    q = torch.zeros(2, 1, 32)
    with pytest.raises(TypeError, match=r"^k must have the element type of q \(got float16 and float32\)$"):
        rope.apply(q, torch.zeros(2, 1, 32, dtype=torch.float16), [0, 1])
