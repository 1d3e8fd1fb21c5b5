"""Rotate q and k of a PyTorch attention layer with ropex, in place, inside the layer's own tensors.

A Llama-style self-attention block (fused qkv projection, grouped-query attention, causal mask)
whose RoPE step is ropex: q and k are slices of the fused projection output, rotated without a
copy. The output is compared with the same layer using Hugging Face's float32 RoPE code, at short
positions (where both agree) and at large ones (where float32 angles drift).

    python3 examples/python/attention_layer.py          (PYTHONPATH=<build>/python, or pip install ./python)
"""

import math
import sys

try:
    import torch
except ImportError:
    print("this example needs PyTorch (Debian: python3-torch)")
    sys.exit(77)  # CTest's "skipped"

import ropex


class Attention(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads, rope):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, rope.head_dim
        self.qkv = torch.nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out = torch.nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.rope = rope

    def forward(self, x, positions, hf_rope=None):
        tokens = x.shape[0]
        qkv = self.qkv(x).view(tokens, self.heads + 2 * self.kv_heads, self.head_dim)
        q = qkv[:, :self.heads]                                  # [tokens, heads, head_dim] views
        k = qkv[:, self.heads:self.heads + self.kv_heads]
        v = qkv[:, self.heads + self.kv_heads:]
        if hf_rope is None:
            self.rope.apply(q, k, positions)                     # in place, inside qkv
        else:
            q, k = hf_rope(q, positions), hf_rope(k, positions)
        # [heads, tokens, head_dim] for attention; GQA by repeating k / v.
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=0)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=0)
        scores = q @ k.transpose(1, 2) / math.sqrt(self.head_dim)
        mask = torch.ones(tokens, tokens, dtype=torch.bool).triu(1)
        attention = scores.masked_fill(mask, -math.inf).softmax(-1)
        return self.out((attention @ v).transpose(0, 1).reshape(tokens, -1)), attention


def hf_float32_rope(base, head_dim):
    """HF's LlamaRotaryEmbedding + apply_rotary_pos_emb: float32 inv_freq and angles, rotate_half."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))

    def rotate(x, positions):  # x [tokens, heads, head_dim]
        freqs = positions.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)[:, None, :]
        half = head_dim // 2
        rotated_half = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * emb.cos() + rotated_half * emb.sin()

    return rotate


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    base, head_dim = 500000.0, 64
    rope = ropex.RotaryEmbedding(head_dim=head_dim, base=base)
    layer = Attention(hidden=256, heads=8, kv_heads=2, rope=rope)
    x = torch.randn(48, 256)
    print(f"ropex {ropex.__version__}, kernel {ropex.kernel_isa()}; {rope}")
    with torch.no_grad():
        for start in (0, 1 << 20, (1 << 24) - 48):
            positions = torch.arange(start, start + 48)
            ours, attention = layer(x, positions)
            theirs, _ = layer(x, positions, hf_rope=hf_float32_rope(base, head_dim))
            entropy = ropex.entropy(attention[:, -1].numpy())  # last query's attention, per head
            print(f"positions {start:>9}..: max |ropex - HF float32| = {(ours - theirs).abs().max().item():.2e}, "
                  f"last-query attention entropy {entropy.mean():.4f} nats")
    # Relative positions are what attention sees: shifting every position by 2^20 changes nothing
    # with exact angles.
    with torch.no_grad():
        near, _ = layer(x, torch.arange(48))
        far, _ = layer(x, torch.arange(48) + (1 << 20))
    print(f"output change when all positions move by 2^20: {(near - far).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
