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


def _last_axis(x, axis, name):
    """x as a C-contiguous float32 array with `axis` moved last (a copy when it is not one already)."""
    a = _np.asarray(x)
    if a.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension")
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{name} must hold real numbers (got {a.dtype})")
    return _np.ascontiguousarray(_np.moveaxis(a, axis, -1), dtype=_np.float32)


def _rows_result(values, shape):
    """Per-row results back in the shape of the leading dimensions; a float for a single distribution."""
    return float(values[0]) if len(shape) == 0 else values.reshape(shape)


def softmax(x, axis=-1):
    """Numerically stable softmax along `axis`, as a new float32 array (-inf logits give exact zeros;
    an all -inf row gives zeros, not NaN). Relative error of each entry <= 6.01 * 2^-24."""
    a = _last_axis(x, axis, "x")
    if _np.may_share_memory(a, x):  # asarray and ascontiguousarray may return x itself
        a = a.copy()
    if a.size:
        _ropex._softmax_rows(a.reshape(-1, a.shape[-1]))
    return _np.moveaxis(a, -1, axis)


def entropy(p, axis=-1, bits=False, tolerance=1e-4, renormalize=False):
    """Shannon entropy -sum p ln p along `axis` (nats, or bits with bits=True).

    p must be a distribution along `axis` (non-negative, sum within `tolerance` of 1) unless renormalize,
    which divides by the sum. Returns a float for 1-D p, else a float64 array without `axis`.
    """
    a = _last_axis(p, axis, "p")
    rows = a.reshape(-1, a.shape[-1])
    return _rows_result(_ropex._entropy_rows(rows, bits, tolerance, renormalize), a.shape[:-1])


def _pair(p, q, axis):
    a = _last_axis(p, axis, "p")
    b = _last_axis(q, axis, "q")
    if a.shape != b.shape:
        a, b = (_np.ascontiguousarray(v) for v in _np.broadcast_arrays(a, b))
    return a, b


def kl_divergence(p, q, axis=-1, tolerance=1e-4, renormalize=False):
    """Kullback-Leibler divergence KL(p || q) = sum p ln(p / q) along `axis`, in nats (+inf where some
    p_i > 0 has q_i = 0). p and q broadcast against each other. Returns a float for 1-D inputs."""
    a, b = _pair(p, q, axis)
    return _rows_result(_ropex._kl_rows(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]), tolerance,
                                        renormalize), a.shape[:-1])


def js_divergence(p, q, axis=-1, tolerance=1e-4, renormalize=False):
    """Jensen-Shannon divergence along `axis`, in nats, symmetric, in [0, ln 2]. p and q broadcast
    against each other. Returns a float for 1-D inputs."""
    a, b = _pair(p, q, axis)
    return _rows_result(_ropex._js_rows(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]), tolerance,
                                        renormalize), a.shape[:-1])
