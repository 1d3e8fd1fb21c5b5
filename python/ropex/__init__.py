"""ropex: rotary position embedding (RoPE) with exact angles, for NumPy arrays and PyTorch tensors.

    import ropex
    rope = ropex.RotaryEmbedding(head_dim=128, policy=ropex.Yarn(factor=4.0, original_max_position=32768),
                                 base=1e6)
    rope.apply(q, k, positions)      # in place, no copy: q, k [..., tokens, heads, head_dim]

The compiled part is ropex._ropex (the C++ headers of include/ropex through pybind11); this file adds
the functions that are plain array bookkeeping: axis handling of the attention measurements, config
paths and dicts, and the one-shot apply_rope.
"""

import json as _json
import numbers as _numbers
import operator as _operator
import os as _os

import numpy as _np

from ._ropex import (  # noqa: F401  (re-exported)
    NTK,
    DynamicNTK,
    Linear,
    Llama3,
    LongRoPE,
    ModelRope,
    Plain,
    RopeConfig,
    RotaryEmbedding,
    Yarn,
    __version__,
    kernel_isa,
)
from . import _ropex

# The classes print as ropex.Yarn, not ropex._ropex.Yarn.
for _class in (NTK, DynamicNTK, Linear, Llama3, LongRoPE, ModelRope, Plain, RopeConfig, RotaryEmbedding, Yarn):
    _class.__module__ = __name__
del _class

__all__ = [
    "RotaryEmbedding", "apply_rope",
    "Plain", "Linear", "NTK", "DynamicNTK", "Yarn", "Llama3", "LongRoPE",
    "ModelRope", "RopeConfig", "load_hf_config",
    "softmax", "entropy", "kl_divergence", "js_divergence",
    "kernel_isa", "__version__",
]


def apply_rope(x, positions, head_dim=None, policy=None, base=10000.0, layout="half", rotary_dim=None, seq_len=0):
    """Rotates x [..., tokens, heads, head_dim] in place, once: RotaryEmbedding(...).apply(x, positions).

    head_dim defaults to x.shape[-1]. Returns x. Build a RotaryEmbedding to rotate more than once.
    """
    if head_dim is None:
        shape = getattr(x, "shape", None)
        if shape is None:
            raise TypeError(f"x must be a NumPy array or a tensor with __dlpack__ (PyTorch), got {type(x).__name__}")
        if len(shape) < 3:
            raise ValueError(f"x must have shape [..., tokens, heads, head_dim] (got shape {tuple(shape)})")
        head_dim = shape[-1]
    rope = RotaryEmbedding(head_dim=head_dim, policy=policy, base=base, rotary_dim=rotary_dim, layout=layout,
                           seq_len=seq_len)
    return rope.apply(x, positions)


def load_hf_config(path_or_dict, layout=None, layer_type="full_attention"):
    """Reads a Hugging Face config.json: a path to the file, a model directory holding it, or the parsed dict.

    Returns a ModelRope (config, policy, max_position, softmax_scale_multiplier, ...). layout ("half" or
    "interleaved") overrides the layout implied by model_type; layer_type picks an entry of rope_parameters
    nested by layer type. Raises ValueError naming the JSON key of a bad value.
    """
    if isinstance(path_or_dict, dict):
        return _ropex._parse_hf_config(_json.dumps(path_or_dict), layout, layer_type)
    try:
        path = _os.fspath(path_or_dict)
    except TypeError:
        raise TypeError("path_or_dict must be a path to config.json, a model directory or a dict "
                        f"(got {type(path_or_dict).__name__})") from None
    if _os.path.isdir(path):
        path = _os.path.join(path, "config.json")
    return _ropex._load_hf_config(path, layout, layer_type)


def _integer(value, name):
    try:
        return _operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int (got {type(value).__name__})") from None


def _flag(value, name):
    if isinstance(value, (bool, _np.bool_, _numbers.Integral)):
        return bool(value)
    raise TypeError(f"{name} must be a bool (got {type(value).__name__})")


def _tolerance(value):
    if not isinstance(value, _numbers.Real):
        raise TypeError(f"tolerance must be a number (got {type(value).__name__})")
    if not value >= 0:
        raise ValueError(f"tolerance must be >= 0 (got {value})")
    return float(value)


def _last_axis(x, axis, name):
    """(x as a C-contiguous float32 array with `axis` moved last, x's shape, axis as a non-negative
    index); a copy when x is not such an array already."""
    try:
        a = _np.asarray(x)
    except (TypeError, ValueError, RuntimeError) as e:  # ragged lists, tensors off the CPU or needing grad
        raise (TypeError if isinstance(e, TypeError) else ValueError)(
            f"{name} cannot be read as a NumPy array: {e}") from None
    if a.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension")
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{name} must hold real numbers (got {a.dtype})")
    axis = _integer(axis, "axis")
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"axis {axis} is out of range for {name} with {a.ndim} dimensions")
    axis %= a.ndim
    return _np.ascontiguousarray(_np.moveaxis(a, axis, -1), dtype=_np.float32), a.shape, axis


def _distribution(x, axis, name):
    """_last_axis for a distribution argument: at least one entry along `axis`."""
    a, shape, axis = _last_axis(x, axis, name)
    if shape[axis] == 0:
        raise ValueError(f"{name} has no entries along axis {axis} (shape {shape})")
    return a, shape, axis


def _row_namer(arguments, leading):
    """The name_row(field, row) the measurements call on a refused row: the argument as the caller
    indexes it, "p" for 1-D p, else "p[1, :, 2]" with ':' along axis. arguments: {field: (shape,
    axis)} before broadcasting; rows run over `leading`, the broadcast shape without axis."""
    def name_row(field, row):
        shape, axis = arguments[field]
        if len(shape) == 1:
            return field
        own = shape[:axis] + shape[axis + 1:]
        index = _np.unravel_index(row, leading)[len(leading) - len(own):]
        index = [0 if n == 1 else int(i) for i, n in zip(index, own)]
        index.insert(axis, ":")
        return f"{field}[{', '.join(map(str, index))}]"
    return name_row


def _rows_result(values, shape):
    """Per-row results back in the shape of the leading dimensions; a float for a single distribution."""
    return float(values[0]) if len(shape) == 0 else values.reshape(shape)


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`, as a new float32 NumPy array (-inf logits give exact
    zeros; an all -inf row gives zeros, not NaN). Relative error of each entry <= 6.01 * 2^-24.

    x is anything numpy.asarray reads, a CPU torch tensor included; the result is a NumPy array in
    every case (torch.from_numpy(result) makes it a tensor without a copy). The same holds for
    entropy, kl_divergence and js_divergence."""
    a, _, axis = _last_axis(x, axis, "x")
    if _np.may_share_memory(a, x):  # asarray and ascontiguousarray may return x itself
        a = a.copy()
    if a.size:
        _ropex._softmax_rows(a.reshape(-1, a.shape[-1]))
    return _np.moveaxis(a, -1, axis)


def entropy(p, axis=-1, bits=False, tolerance=1e-4, renormalize=False):
    """Shannon entropy -sum p ln p along `axis` (nats, or bits with bits=True).

    p must be a distribution along `axis` (non-negative, sum within `tolerance` of 1) unless renormalize,
    which divides by the sum. Returns a float for 1-D p, else a float64 NumPy array without `axis`.
    """
    bits, renormalize, tolerance = _flag(bits, "bits"), _flag(renormalize, "renormalize"), _tolerance(tolerance)
    a, shape, axis = _distribution(p, axis, "p")
    rows = a.reshape(-1, a.shape[-1])
    name_row = _row_namer({"p": (shape, axis)}, a.shape[:-1])
    return _rows_result(_ropex._entropy_rows(rows, bits, tolerance, renormalize, name_row), a.shape[:-1])


def _pair(divergence, p, q, axis, tolerance, renormalize):
    renormalize, tolerance = _flag(renormalize, "renormalize"), _tolerance(tolerance)
    a, p_shape, p_axis = _distribution(p, axis, "p")
    b, q_shape, q_axis = _distribution(q, axis, "q")
    if a.shape != b.shape:
        try:
            a, b = (_np.ascontiguousarray(v) for v in _np.broadcast_arrays(a, b))
        except ValueError:
            raise ValueError(f"p and q must broadcast against each other with axis {axis} last "
                             f"(got shapes {p_shape} and {q_shape})") from None
    name_row = _row_namer({"p": (p_shape, p_axis), "q": (q_shape, q_axis)}, a.shape[:-1])
    values = divergence(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]), tolerance, renormalize, name_row)
    return _rows_result(values, a.shape[:-1])


def kl_divergence(p, q, axis=-1, tolerance=1e-4, renormalize=False):
    """Kullback-Leibler divergence KL(p || q) = sum p ln(p / q) along `axis`, in nats (+inf where some
    p_i > 0 has q_i = 0). p and q broadcast against each other. Returns a float for 1-D inputs, else a
    float64 NumPy array."""
    return _pair(_ropex._kl_rows, p, q, axis, tolerance, renormalize)


def js_divergence(p, q, axis=-1, tolerance=1e-4, renormalize=False):
    """Jensen-Shannon divergence along `axis`, in nats, symmetric, in [0, ln 2]. p and q broadcast
    against each other. Returns a float for 1-D inputs, else a float64 NumPy array."""
    return _pair(_ropex._js_rows, p, q, axis, tolerance, renormalize)
