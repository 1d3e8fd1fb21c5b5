# Writes the PyTorch fixtures of tests/test_hf_parity.cpp: transformers' rotary arithmetic
# (LlamaRotaryEmbedding.forward + apply_rotary_pos_emb, DeepSeek's apply_rotary_pos_emb_interleave)
# evaluated by PyTorch on the CPU. Run once with a Python that has torch; the .bin files are
# committed, so the tests do not need Python.
#   /usr/bin/python3 tests/data/hf_parity/generate.py
# File layout (little endian): magic "RPXHF1\0\0", int64 tokens, heads, head_dim, rotary_dim,
# dtype (0 float32, 1 float16, 2 bfloat16), interleave (0/1), float64 base, float64 scaling; then
# int64 positions[tokens], float32 inv_freq[r/2], float32 cos32[tokens][r], sin32[tokens][r],
# T cos[tokens][r], sin[tokens][r], x[tokens][heads][head_dim], out[tokens][heads][head_dim].
import os, struct
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {0: torch.float32, 1: torch.float16, 2: torch.bfloat16}


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def case(name, tokens, heads, head_dim, rotary_dim, dtype, base, scaling, max_pos, interleave, seed):
    g = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, max_pos, (tokens,), generator=g, dtype=torch.int64)
    positions[0] = max_pos - 1
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim))
    freqs = (inv_freq[None, :, None].float() @ positions[None, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)[0]
    cos32 = emb.cos() * scaling
    sin32 = emb.sin() * scaling
    t = DTYPES[dtype]
    cos, sin = cos32.to(t), sin32.to(t)
    x = torch.randn(tokens, heads, head_dim, generator=g).to(t)
    q = x.transpose(0, 1)  # [heads][tokens][head_dim], cos broadcast over heads
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    if interleave:
        h, s, d = q_rot.shape
        q_rot = q_rot.reshape(h, s, d // 2, 2).transpose(3, 2).reshape(h, s, d)
    out = torch.cat((q_rot * cos + rotate_half(q_rot) * sin, q_pass), dim=-1).transpose(0, 1).contiguous()
    with open(os.path.join(HERE, name + ".bin"), "wb") as f:
        f.write(b"RPXHF1\0\0")
        f.write(struct.pack("<6q2d", tokens, heads, head_dim, rotary_dim, dtype, int(interleave), base, scaling))
        for a in (positions, inv_freq, cos32, sin32):
            f.write(a.contiguous().numpy().tobytes())
        for a in (cos, sin, x, out):
            f.write(a.contiguous().view(torch.int16 if dtype else torch.int32).numpy().tobytes())


case("f32_d128", 16, 2, 128, 128, 0, 10000.0, 1.0, 1 << 20, False, 1)
case("f16_d64", 16, 2, 64, 64, 1, 10000.0, 1.0, 1 << 20, False, 2)
case("bf16_d256", 16, 2, 256, 256, 2, 500000.0, 1.0, 1 << 20, False, 3)
case("bf16_partial", 16, 2, 80, 32, 2, 10000.0, 1.0, 1 << 20, False, 4)
case("f16_yarn_scaled", 16, 2, 128, 128, 1, 1000000.0, 1.1386294361, 1 << 17, False, 5)
case("bf16_deepseek_interleave", 16, 2, 64, 64, 2, 10000.0, 1.0, 1 << 17, True, 6)
case("f32_deepseek_interleave", 16, 2, 64, 64, 0, 10000.0, 1.0, 1 << 17, True, 7)
