"""softmax, entropy, kl_divergence, js_divergence along an axis, against float64 NumPy."""

import math

import numpy as np
import pytest

import ropex


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


def test_not_a_distribution_is_a_value_error():
    with pytest.raises(ValueError, match="p"):
        ropex.entropy([0.5, 0.6])
    with pytest.raises(ValueError, match="row 1"):
        ropex.kl_divergence([[0.5, 0.5], [0.9, 0.9]], [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ValueError):
        ropex.js_divergence([0.5, -0.5, 1.0], [0.2, 0.3, 0.5])
    with pytest.raises(TypeError):
        ropex.entropy(np.array(["a", "b"]))
