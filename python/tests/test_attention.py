"""softmax, entropy, kl_divergence, js_divergence along an axis, against float64 NumPy."""

import math

import numpy as np
import pytest

import ropex
from conftest import needs_torch, torch


def np_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_entropy(p, axis=-1):
    p = np.asarray(p, np.float64)
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0), axis=axis)


def np_kl(p, q, axis=-1):
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    return np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1) / q), 0), axis=axis)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_along_an_axis(axis):
    x = np.random.default_rng(0).normal(0, 3, (4, 5, 6)).astype(np.float32)
    before = x.copy()
    y = ropex.softmax(x, axis=axis)
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, np_softmax(x, axis), rtol=6.01 * 2 ** -24 * 4, atol=1e-30)
    np.testing.assert_array_equal(x, before)  # a new array


def test_softmax_masked_and_large_logits():
    y = ropex.softmax(np.array([2.0, 1.0, -np.inf, 0.5]))
    assert y[2] == 0.0 and y.sum() == pytest.approx(1.0, abs=1e-6)
    assert np.array_equal(ropex.softmax(np.full(3, -np.inf)), np.zeros(3, np.float32))
    np.testing.assert_allclose(ropex.softmax(np.array([1e4, 1e4 - 1.0], np.float32)), np_softmax([0.0, -1.0]),
                               rtol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0])
def test_entropy_along_an_axis(axis):
    p = ropex.softmax(np.random.default_rng(1).normal(0, 2, (7, 9)), axis=axis)
    h = ropex.entropy(p, axis=axis)
    assert h.dtype == np.float64 and h.shape == ((9,) if axis == 0 else (7,))
    np.testing.assert_allclose(h, np_entropy(p, axis), atol=1.5e-7 + 3e-7 * math.log(9))


def test_entropy_scalar_bits_and_renormalize():
    assert isinstance(ropex.entropy([0.5, 0.5]), float)
    assert ropex.entropy([0.5, 0.5]) == pytest.approx(math.log(2), abs=1e-7)
    assert ropex.entropy([0.25] * 4, bits=True) == pytest.approx(2.0, abs=1e-6)
    assert ropex.entropy([1.0, 1.0], renormalize=True) == pytest.approx(math.log(2), abs=1e-7)
    assert ropex.entropy([1.0, 0.0, 0.0]) == 0.0


def test_kl_and_js():
    rng = np.random.default_rng(2)
    p, q = ropex.softmax(rng.normal(size=(3, 8))), ropex.softmax(rng.normal(size=(3, 8)))
    np.testing.assert_allclose(ropex.kl_divergence(p, q), np_kl(p, q), atol=5e-6)
    m = (p.astype(np.float64) + q) / 2
    np.testing.assert_allclose(ropex.js_divergence(p, q), (np_kl(p, m) + np_kl(q, m)) / 2, atol=5e-6)
    assert ropex.kl_divergence([1.0, 0.0], [0.0, 1.0]) == math.inf
    assert ropex.js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(math.log(2))
    assert ropex.js_divergence(p[0], p[0]) == 0.0


def test_divergences_broadcast_and_take_an_axis():
    rng = np.random.default_rng(3)
    p = ropex.softmax(rng.normal(size=(5, 4)), axis=0)
    uniform = np.full((5, 1), 0.2)
    js = ropex.js_divergence(p, uniform, axis=0)
    assert js.shape == (4,)
    np.testing.assert_allclose(js, [ropex.js_divergence(p[:, j], uniform[:, 0]) for j in range(4)])


def message_of(error, call):
    with pytest.raises(error) as caught:
        call()
    return str(caught.value)


def test_not_a_distribution_names_the_python_argument_and_keyword():
    # The Python names (p, q, renormalize=True), never the C++ ones (probs, distribution_options).
    assert message_of(ValueError, lambda: ropex.entropy([0.5, 0.7])) == \
        "p sums to 1.200000, not 1 within tolerance 0.000100 (pass renormalize=True to divide by the sum)"
    assert message_of(ValueError, lambda: ropex.kl_divergence([0.5, 0.5], [0.5, 0.7])).startswith(
        "q sums to 1.200000, not 1 within tolerance 0.000100 (pass renormalize=True")
    assert message_of(ValueError, lambda: ropex.js_divergence([0.5, -0.5, 1.0], [0.2, 0.3, 0.5])) == \
        "p has a negative entry (min -0.500000)"
    assert message_of(ValueError, lambda: ropex.entropy([np.nan, 1.0])) == "p has a NaN or infinite entry"
    assert message_of(ValueError, lambda: ropex.entropy([0.0, 0.0], renormalize=True)) == \
        "p sums to 0 and cannot be renormalised"
    with pytest.raises(TypeError, match="p must hold real numbers"):
        ropex.entropy(np.array(["a", "b"]))


def test_a_refused_row_is_indexed_like_the_argument():
    good = np.full((2, 3, 4), 0.25)
    bad = good.copy()
    bad[1, 2, 3] = 0.5
    assert message_of(ValueError, lambda: ropex.entropy(bad)).startswith("p[1, 2, :] sums to 1.25")
    assert message_of(ValueError, lambda: ropex.entropy(bad.transpose(2, 0, 1), axis=0)).startswith(
        "p[:, 1, 2] sums to 1.25")
    assert message_of(ValueError, lambda: ropex.kl_divergence(good, bad)).startswith("q[1, 2, :] sums")
    # Broadcast arguments are named by their own index: q's one row, p's row of a size-1 dimension.
    assert message_of(ValueError, lambda: ropex.js_divergence(good, [0.5] * 4)).startswith("q sums to 2.0")
    assert message_of(ValueError, lambda: ropex.js_divergence(bad[1:, 2:], good)).startswith(
        "p[0, 0, :] sums to 1.25")


@pytest.mark.parametrize("call,error,message", [
    (lambda: ropex.entropy([0.5, 0.5], tolerance="a"), TypeError, "tolerance must be a number (got str)"),
    (lambda: ropex.entropy([0.5, 0.5], tolerance=-1e-3), ValueError, "tolerance must be >= 0 (got -0.001)"),
    (lambda: ropex.entropy([0.5, 0.5], tolerance=float("nan")), ValueError, "tolerance must be >= 0 (got nan)"),
    (lambda: ropex.entropy([0.5, 0.5], bits="yes"), TypeError, "bits must be a bool (got str)"),
    (lambda: ropex.kl_divergence([1.0], [1.0], renormalize=None), TypeError, "renormalize must be a bool (got NoneType)"),
    (lambda: ropex.js_divergence([1.0], [1.0], tolerance=[0.1]), TypeError, "tolerance must be a number (got list)"),
    (lambda: ropex.softmax([1.0, 2.0], axis=1.5), TypeError, "axis must be an int (got float)"),
    (lambda: ropex.softmax([1.0, 2.0], axis=1), ValueError, "axis 1 is out of range for x with 1 dimensions"),
    (lambda: ropex.entropy(np.ones((2, 0))), ValueError, "p has no entries along axis 1 (shape (2, 0))"),
    (lambda: ropex.kl_divergence(np.ones(3) / 3, np.ones(4) / 4), ValueError,
     "p and q must broadcast against each other with axis -1 last (got shapes (3,) and (4,))"),
    (lambda: ropex.entropy([[0.5], [0.5, 0.5]]), ValueError, "p cannot be read as a NumPy array: "),
])
def test_bad_arguments_of_the_measurements(call, error, message):
    assert message_of(error, call).startswith(message)


def test_flags_take_bools_and_ints():
    assert ropex.entropy([0.25] * 4, bits=np.bool_(True)) == pytest.approx(2.0, abs=1e-6)
    assert ropex.entropy([1.0, 1.0], renormalize=1) == pytest.approx(math.log(2), abs=1e-7)


@needs_torch
def test_torch_input_gives_numpy_results():
    # Documented: the measurements read tensors through numpy.asarray and return NumPy arrays.
    logits = torch.randn(3, 5)
    p = ropex.softmax(logits)
    assert isinstance(p, np.ndarray) and p.dtype == np.float32
    np.testing.assert_allclose(p, torch.softmax(logits, -1).numpy(), rtol=1e-6)
    assert isinstance(ropex.entropy(torch.from_numpy(p)), np.ndarray)
    with pytest.raises(ValueError, match="^x cannot be read as a NumPy array: "):
        ropex.softmax(torch.randn(3, requires_grad=True))
