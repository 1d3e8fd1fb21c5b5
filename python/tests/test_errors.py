"""Bad input: a TypeError or ValueError naming the argument, and the buffer left untouched."""

import numpy as np
import pytest

import ropex
from conftest import DLPackProducer, needs_torch, torch


@pytest.fixture
def rope():
    return ropex.RotaryEmbedding(head_dim=32)


def x_and_copy(shape=(3, 2, 32), dtype=np.float32):
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(dtype)
    return x, x.copy()


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.complex64])
def test_wrong_dtype_is_a_type_error(rope, dtype):
    x, before = x_and_copy(dtype=dtype)
    with pytest.raises(TypeError, match=r"x must hold float32, float16 or bfloat16 \(got " + np.dtype(dtype).name):
        rope.apply(x, [0, 1, 2])
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("value", [[[[0.0] * 32]], "text", None, 3.0])
def test_not_an_array_is_a_type_error(rope, value):
    with pytest.raises(TypeError, match="x must be a NumPy array or a tensor with __dlpack__"):
        rope.apply(value, [0])


@pytest.mark.parametrize("shape,message", [
    ((3, 32), r"x must have shape \[..., tokens, heads, head_dim\] \(got shape \(3, 32\)\)"),
    ((3, 2, 64), r"x.shape\[-1\] must equal head_dim 32 \(got 64\)"),
    ((32,), r"got shape \(32,\)"),
])
def test_wrong_shape_is_a_value_error(rope, shape, message):
    x, before = x_and_copy(shape)
    with pytest.raises(ValueError, match=message):
        rope.apply(x, [0, 1, 2])
    np.testing.assert_array_equal(x, before)


def test_read_only_is_a_value_error(rope):
    x, before = x_and_copy()
    x.flags.writeable = False
    with pytest.raises(ValueError, match="x is read-only"):
        rope.apply(x, [0, 1, 2])
    np.testing.assert_array_equal(x, before)
    with pytest.raises(ValueError, match="read-only"):
        rope.apply(np.broadcast_to(np.ones((1, 2, 32), np.float32), (3, 2, 32)), [0, 1, 2])


def test_non_contiguous_last_dimension(rope):
    storage, before = x_and_copy((3, 2, 64))
    with pytest.raises(ValueError, match="contiguous in its last dimension"):
        rope.apply(storage[..., ::2], [0, 1, 2])
    np.testing.assert_array_equal(storage, before)


def test_negative_strides(rope):
    x, before = x_and_copy()
    with pytest.raises(ValueError, match="negative stride in dimension 0"):
        rope.apply(x[::-1], [0, 1, 2])
    np.testing.assert_array_equal(x, before)


def test_overlapping_rows_from_as_strided(rope):
    storage, before = x_and_copy((4, 2, 32))
    overlapping = np.lib.stride_tricks.as_strided(storage, shape=(3, 2, 32), strides=(16 * 4, 32 * 4, 4))
    with pytest.raises(ValueError, match="overlap"):
        rope.apply(overlapping, [0, 1, 2])
    np.testing.assert_array_equal(storage, before)


def test_misaligned_buffer(rope):
    raw = np.zeros(3 * 2 * 32 * 4 + 1, np.uint8)
    x = raw[1:].view(np.float32).reshape(3, 2, 32)
    with pytest.raises(ValueError, match="not aligned"):
        rope.apply(x, [0, 1, 2])


@pytest.mark.parametrize("positions,error,message", [
    ([0, 1], ValueError, r"positions has 2 entries; x has 3 tokens"),
    (np.array([0.5, 1.0, 2.0]), TypeError, r"positions must hold integers \(got float64\)"),
    ([0, 1, (1 << 53) + 1], ValueError, r"positions\[2\] magnitude must be <= 2\^53"),
    ("abc", TypeError, "positions must hold integers"),
    ([0, 1, 1 << 70], ValueError, "outside int64"),
    (np.array([0, 1, (1 << 64) - 1], dtype=np.uint64), ValueError, "outside int64"),
])
def test_bad_positions(rope, positions, error, message):
    x, before = x_and_copy()
    with pytest.raises(error, match=message):
        rope.apply(x, positions)
    np.testing.assert_array_equal(x, before)


def test_bad_position_in_a_later_batch_row_writes_nothing(rope):
    # Three separate calls underneath (the batch stride does not fold); the check comes first.
    storage, before = x_and_copy((3, 4, 2, 32))
    x = storage[:, :2]
    positions = np.array([[0, 1], [2, 3], [4, 1 << 60]])
    with pytest.raises(ValueError, match=r"positions\[5\]"):
        rope.apply(x, positions)
    np.testing.assert_array_equal(storage, before)


def test_q_and_k_mismatches(rope):
    q, q0 = x_and_copy((3, 4, 32))
    k, k0 = x_and_copy((3, 2, 32), dtype=np.float16)
    with pytest.raises(TypeError, match="k must have the element type of q"):
        rope.apply(q, k, [0, 1, 2])
    k2, _ = x_and_copy((4, 2, 32))
    with pytest.raises(ValueError, match=r"k.shape\[:-2\] must equal q.shape\[:-2\]"):
        rope.apply(q, k2, [0, 1, 2])
    with pytest.raises(ValueError, match="q and k overlap in memory"):
        rope.apply(q, q, [0, 1, 2])
    k3, k3_before = x_and_copy((3, 2, 16))
    with pytest.raises(ValueError, match=r"k.shape\[-1\] must equal head_dim 32"):
        rope.apply(q, k3, [0, 1, 2])
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(k, k0)


def test_bad_shift_delta(rope):
    x, before = x_and_copy()
    with pytest.raises(ValueError, match="delta magnitude must be <= 2\\^53"):
        rope.shift(x, (1 << 53) + 1)
    with pytest.raises(ValueError, match=r"^delta must fit in int64 \(got 1180591620717411303424\)$"):
        rope.shift(x, 1 << 70)
    for delta, kind in [(1.5, "float"), ("3", "str"), (None, "NoneType"), (np.float64(2.0), "numpy.float64")]:
        with pytest.raises(TypeError, match=rf"^delta must be an int \(got {kind}\)$"):  # not the tensor's repr
            rope.shift(x, delta)
    np.testing.assert_array_equal(x, before)
    rope.shift(x, np.int32(3))  # NumPy integers are ints
    assert not np.array_equal(x, before)


@needs_torch
def test_torch_shift_by_a_float_names_delta():
    x = torch.randn(2, 1, 32)
    before = x.clone()
    with pytest.raises(TypeError, match=r"^delta must be an int \(got float\)$"):
        ropex.RotaryEmbedding(head_dim=32).shift(x, 1.5)
    assert torch.equal(x, before)


def make_model_rope(seq_len):
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000.0}
    return ropex.load_hf_config(config).rotary_embedding(seq_len=seq_len)


# Each constructor and entry point, a wrongly typed scalar: a TypeError naming that argument alone.
@pytest.mark.parametrize("call,message", [
    (lambda: ropex.RotaryEmbedding(head_dim=64.0), "head_dim must be an int (got float)"),
    (lambda: ropex.RotaryEmbedding(head_dim="64"), "head_dim must be an int (got str)"),
    (lambda: ropex.RotaryEmbedding(head_dim=64, base="1e4"), "base must be a number (got str)"),
    (lambda: ropex.RotaryEmbedding(head_dim=64, rotary_dim=32.0), "rotary_dim must be an int (got float)"),
    (lambda: ropex.RotaryEmbedding(head_dim=64, layout=1), "layout must be a str (got int)"),
    (lambda: ropex.RotaryEmbedding(head_dim=64, seq_len=1.5), "seq_len must be an int (got float)"),
    (lambda: ropex.Linear(factor="2"), "factor must be a number (got str)"),
    (lambda: ropex.NTK(factor=None), "factor must be a number (got NoneType)"),
    (lambda: ropex.DynamicNTK(factor=2.0, max_position=2048.5), "max_position must be an int (got float)"),
    (lambda: ropex.Yarn(factor=4.0, original_max_position=4096.0), "original_max_position must be an int (got float)"),
    (lambda: ropex.Yarn(factor=4.0, beta_fast="32"), "beta_fast must be a number (got str)"),
    (lambda: ropex.Yarn(factor=4.0, attention_factor="1"), "attention_factor must be a number (got str)"),
    (lambda: ropex.Yarn(factor=4.0, truncate="no"), "truncate must be a bool (got str)"),
    (lambda: ropex.Llama3(low_freq_factor=[1.0]), "low_freq_factor must be a number (got list)"),
    (lambda: ropex.LongRoPE([1.0, "a"], [1.0, 1.0]), "short_factor[1] must be a number (got str)"),
    (lambda: ropex.LongRoPE([1.0], 2.0), "long_factor must be a sequence of numbers (got float)"),
    (lambda: ropex.LongRoPE("ab", [1.0]), "short_factor must be a sequence of numbers (got str)"),
    (lambda: make_model_rope(0.5), "seq_len must be an int (got float)"),
    (lambda: ropex.load_hf_config({"model_type": "llama"}, layout=2), "layout must be a str (got int)"),
    (lambda: ropex.load_hf_config({"model_type": "llama"}, layer_type=None), "layer_type must be a str (got NoneType)"),
    (lambda: ropex.load_hf_config(3), "path_or_dict must be a path to config.json, a model directory or a dict (got int)"),
    (lambda: ropex.apply_rope(np.zeros((1, 1, 32), np.float32), [0], base=[1.0]), "base must be a number (got list)"),
    (lambda: ropex.apply_rope([[[0.0] * 32]], [0]), "x must be a NumPy array or a tensor with __dlpack__ (PyTorch), got list"),
])
def test_wrongly_typed_scalar_names_the_argument(call, message):
    with pytest.raises(TypeError) as error:
        call()
    assert str(error.value) == message


def test_numpy_scalars_are_accepted_where_python_ones_are():
    rope = ropex.RotaryEmbedding(head_dim=np.int64(64), base=np.float32(500000.0), rotary_dim=np.int16(32),
                                 seq_len=np.uint8(3))
    assert (rope.head_dim, rope.rotary_dim, rope.base, rope.seq_len) == (64, 32, 500000.0, 3)
    assert ropex.Yarn(factor=np.float64(4.0), original_max_position=np.int32(4096), truncate=np.bool_(False)) == \
        ropex.Yarn(factor=4.0, original_max_position=4096, truncate=False)
    assert ropex.LongRoPE(np.ones(4), (1, 2, 3, 4)).long_factor == [1.0, 2.0, 3.0, 4.0]


def test_out_of_range_integers_are_value_errors():
    with pytest.raises(ValueError, match=r"^head_dim must fit in a C int \(got 4294967296\)$"):
        ropex.RotaryEmbedding(head_dim=1 << 32)
    with pytest.raises(ValueError, match=r"^max_position must fit in int64"):
        ropex.DynamicNTK(factor=2.0, max_position=1 << 64)
    with pytest.raises(ValueError, match=r"^factor is too large for a float$"):
        ropex.Linear(factor=10 ** 400)


@pytest.mark.parametrize("kwargs,message", [
    (dict(head_dim=0), "head_dim must be > 0"),
    (dict(head_dim=64, rotary_dim=65), "rotary_dim must be <= head_dim"),
    (dict(head_dim=64, rotary_dim=31), "rotary_dim must be even"),
    (dict(head_dim=64, rotary_dim=0), "rotary_dim must be > 0"),
    (dict(head_dim=64, base=1.0), "base must be > 1"),
    (dict(head_dim=64, layout="neox"), 'layout must be "half" or "interleaved"'),
    (dict(head_dim=64, seq_len=-1), "seq_len must be >= 0"),
    (dict(head_dim=2, policy=ropex.NTK(2.0)), "rotary_dim must be > 2 for ntk"),
    (dict(head_dim=32, policy=ropex.LongRoPE([1.0] * 8, [1.0] * 8)), "longrope.short_factor must have"),
])
def test_bad_configuration_is_a_value_error_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ropex.RotaryEmbedding(**kwargs)


def test_policy_of_the_wrong_type():
    with pytest.raises(TypeError, match="policy must be a ropex policy"):
        ropex.RotaryEmbedding(head_dim=32, policy="yarn")


# ---- DLPack ------------------------------------------------------------------------------------------

def test_dlpack_capsule_is_released_through_the_producer():
    # ropex borrows: the capsule keeps its "dltensor" name, and the producer's destructor calls the
    # deleter exactly once per export, after the call (and after a failed call too).
    x, before = x_and_copy((2, 1, 32))
    producer = DLPackProducer(x)
    rope = ropex.RotaryEmbedding(head_dim=32)
    rope.apply(producer, [0, 1000])
    assert producer.exported == 1 and producer.deleted == 1
    assert not np.array_equal(x, before)  # the memory behind the capsule was rotated in place
    with pytest.raises(ValueError):
        rope.apply(producer, [0, 1, 2])
    assert producer.exported == 2 and producer.deleted == 2


def test_dlpack_device_other_than_cpu():
    x, before = x_and_copy((2, 1, 32))
    producer = DLPackProducer(x, device_type=2)
    with pytest.raises(ValueError, match=r"x must be on the CPU \(got cuda:0\)"):
        ropex.RotaryEmbedding(head_dim=32).apply(producer, [0, 1])
    np.testing.assert_array_equal(x, before)
    assert producer.deleted == producer.exported == 1


@pytest.mark.parametrize("code,bits,name", [(2, 64, "float64"), (0, 32, "int32"), (5, 64, "complex64")])
def test_dlpack_dtype(code, bits, name):
    x = np.zeros((2, 1, 32), np.float32 if bits == 32 else np.float64)
    with pytest.raises(TypeError, match=rf"x must hold float32, float16 or bfloat16 \(got {name}\)"):
        ropex.RotaryEmbedding(head_dim=32).apply(DLPackProducer(x, code=code, bits=bits), [0, 1])


@needs_torch
@pytest.mark.parametrize("dtype", ["float64", "int32", "complex64"])
def test_torch_wrong_dtype(dtype):
    x = torch.zeros(2, 1, 32, dtype=getattr(torch, dtype))
    with pytest.raises(TypeError, match="x must hold float32, float16 or bfloat16"):
        ropex.RotaryEmbedding(head_dim=32).apply(x, torch.arange(2))


@needs_torch
def test_torch_device_meta_is_refused():
    # PyTorch cannot export a meta tensor through DLPack at all; the error still says where it is.
    rope = ropex.RotaryEmbedding(head_dim=32)
    with pytest.raises(ValueError, match=r"^x must be on the CPU \(got meta\)$"):
        rope.apply(torch.empty(2, 1, 32, device="meta"), torch.arange(2))
    q = torch.randn(2, 1, 32)
    before = q.clone()
    with pytest.raises(ValueError, match=r"^k must be on the CPU \(got meta\)$"):
        rope.apply(q, torch.empty(2, 1, 32, device="meta"), torch.arange(2))
    with pytest.raises(ValueError, match=r"^positions must be on the CPU \(got meta\)$"):
        rope.apply(q, torch.empty(2, dtype=torch.int64, device="meta"))
    assert torch.equal(q, before)


class FailingExport(DLPackProducer):
    """A producer whose export fails, for a device that it reports through __dlpack_device__."""

    def __dlpack__(self, stream=None):
        raise RuntimeError("no export from this device")


@pytest.mark.parametrize("device_type,message", [
    (2, r"^x must be on the CPU \(got cuda:0\)$"),
    (1, r"^x cannot be exported through DLPack: RuntimeError: no export from this device$"),
])
def test_failed_export_names_the_device(device_type, message):
    x = np.zeros((2, 1, 32), np.float32)
    with pytest.raises(ValueError, match=message):
        ropex.RotaryEmbedding(head_dim=32).apply(FailingExport(x, device_type=device_type), [0, 1])
