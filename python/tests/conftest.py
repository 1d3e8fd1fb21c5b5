"""Shared test helpers: an HF-style float64 reference of RoPE (written here, from the formulas in
docs and Hugging Face transformers' modeling_rope_utils.py), the HF-style float32 torch code, and a
minimal DLPack producer built with ctypes (to test devices, dtypes and the capsule protocol without
depending on a particular array library)."""

import ctypes
import math

import numpy as np
import pytest

import ropex

try:
    import torch
except ImportError:  # the torch tests skip with this reason
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed (Debian: python3-torch)")


# ---- float64 reference -------------------------------------------------------------------------

def default_inv_freq(base, rotary_dim):
    return 1.0 / base ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


def yarn_mscale(factor, mscale=1.0):
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def reference_frequencies(policy, rotary_dim, base, seq_len=0):
    """(inv_freq, attention_factor) in float64, as Hugging Face computes them (in float64 here)."""
    r = rotary_dim
    inv0 = default_inv_freq(base, r)
    if policy is None or isinstance(policy, ropex.Plain):
        return inv0, 1.0
    if isinstance(policy, ropex.Linear):
        return inv0 / policy.factor, 1.0
    if isinstance(policy, ropex.NTK):
        return default_inv_freq(base * policy.factor ** (r / (r - 2)), r), 1.0
    if isinstance(policy, ropex.DynamicNTK):
        length = policy.max_position
        seq = seq_len if seq_len > length else length
        alpha = policy.factor * seq / length - (policy.factor - 1)
        return default_inv_freq(base * alpha ** (r / (r - 2)), r), 1.0
    if isinstance(policy, ropex.Yarn):
        s, length = policy.factor, policy.original_max_position

        def correction_dim(rotations):
            return r * math.log(length / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low, high = correction_dim(policy.beta_fast), correction_dim(policy.beta_slow)
        if policy.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, r - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(r // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        extrapolation = 1 - ramp
        inv = inv0 / s * (1 - extrapolation) + inv0 * extrapolation
        if policy.mscale and policy.mscale_all_dim:
            m = yarn_mscale(s, policy.mscale) / yarn_mscale(s, policy.mscale_all_dim)
        else:
            m = yarn_mscale(s)
        return inv, m
    if isinstance(policy, ropex.Llama3):
        length, s = policy.original_max_position, policy.factor
        low_wavelen, high_wavelen = length / policy.low_freq_factor, length / policy.high_freq_factor
        wavelen = 2 * math.pi / inv0
        inv = np.where(wavelen > low_wavelen, inv0 / s, inv0)
        sigma = (length / wavelen - policy.low_freq_factor) / (policy.high_freq_factor - policy.low_freq_factor)
        blended = (1 - sigma) * inv / s + sigma * inv
        middle = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(middle, blended, inv), 1.0
    if isinstance(policy, ropex.LongRoPE):
        ext = np.array(policy.long_factor if seq_len > policy.original_max_position else policy.short_factor)
        s = policy.factor
        m = 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(policy.original_max_position))
        return 1.0 / (ext * base ** (np.arange(0, r, 2, dtype=np.float64) / r)), m
    raise TypeError(policy)


def reference_rotate(x, positions, inv_freq, attention_factor, layout="half", sign=1.0):
    """x [..., tokens, heads, head_dim] rotated in float64; positions broadcast against x.shape[:-2]."""
    x = np.asarray(x, dtype=np.float64)
    half = inv_freq.shape[0]
    r = 2 * half
    theta = np.asarray(positions, dtype=np.float64)[..., None] * inv_freq * sign  # [..., tokens, r/2]
    cos = (np.cos(theta) * attention_factor)[..., None, :]  # [..., tokens, 1, r/2]
    sin = (np.sin(theta) * attention_factor)[..., None, :]
    out = x.copy()
    if layout == "half":
        a, b = x[..., :half], x[..., half:r]
        out[..., :half] = a * cos - b * sin
        out[..., half:r] = b * cos + a * sin
    else:
        a, b = x[..., 0:r:2], x[..., 1:r:2]
        out[..., 0:r:2] = a * cos - b * sin
        out[..., 1:r:2] = b * cos + a * sin
    return out


def reference(rope, x, positions, sign=1.0):
    """What rope.apply(x, positions) must give, in float64."""
    inv, m = reference_frequencies(rope.policy, rope.rotary_dim, rope.base, rope.seq_len)
    return reference_rotate(x, positions, inv, m, rope.layout, sign)


# ---- the HF-style float32 torch computation (LlamaRotaryEmbedding + apply_rotary_pos_emb) ---------

def hf_torch_rope(q, position_ids, base, attention_scaling=1.0):
    """q [batch, heads, seq, dim] float32, rotated the way HF transformers does on CPU: float32
    inv_freq, float32 angles, rotate_half. Returns a new tensor."""
    dim = q.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = (emb.cos() * attention_scaling).unsqueeze(1)
    sin = (emb.sin() * attention_scaling).unsqueeze(1)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    return q * cos + rotate_half(q) * sin


# ---- a DLPack producer in ctypes ------------------------------------------------------------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, CAPSULE_DESTRUCTOR]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # The DLPack rule: a capsule still named "dltensor" was not consumed, so its producer deletes it.
    if _capsule_is_valid(capsule, b"dltensor"):
        managed = ctypes.cast(_capsule_get_pointer(capsule, b"dltensor"), ctypes.POINTER(DLManagedTensor))
        managed.contents.deleter(managed)


class DLPackProducer:
    """Exports `array`'s memory (a NumPy array) through __dlpack__ with a chosen DLPack dtype and device;
    counts capsules made and deleter calls."""

    def __init__(self, array, code=2, bits=32, device_type=1):
        self.array = array
        self.code, self.bits, self.device_type = code, bits, device_type
        self.exported = 0
        self.deleted = 0
        self._alive = {}

    def __dlpack__(self, stream=None):
        a = self.array
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        strides = (ctypes.c_int64 * a.ndim)(*(s // a.itemsize for s in a.strides))
        managed = DLManagedTensor()
        managed.dl_tensor = DLTensor(a.ctypes.data, DLDevice(self.device_type, 0), a.ndim,
                                     DLDataType(self.code, self.bits, 1), shape, strides, 0)
        key = ctypes.addressof(managed)

        def delete(_):
            self.deleted += 1
            self._alive.pop(key)

        deleter = DELETER(delete)
        managed.deleter = deleter
        self._alive[key] = (managed, shape, strides, deleter)
        self.exported += 1
        return _capsule_new(key, b"dltensor", _capsule_destructor)

    def __dlpack_device__(self):
        return (self.device_type, 0)
