"""Rotate q and k of a PyTorch attention layer with ropex, then plot its attention entropy per policy.

A Llama-style self-attention block (fused qkv projection, grouped-query attention, causal mask)
whose RoPE step is ropex: q and k are slices of the fused projection output, rotated in place
without a copy.

1. The layer's output is compared with the same layer using Hugging Face's float32 RoPE code, at
   short positions (where both agree) and at large ones (where float32 angles drift).
2. The layer is given each scaling policy in turn, extending a model pretrained at 2048 positions
   8x, and the entropy of its last queries' attention is measured with ropex.entropy at growing
   context lengths and plotted with matplotlib (one curve per policy). The input shares a mean
   direction across tokens, so the unrotated logits favour no position and what changes with the
   context is RoPE's long-range decay and the policy's attention factor (after "Understanding the
   RoPE Extensions of Long-Context LLMs: An Attention Perspective", COLING 2025, Algorithm 1).

    python3 examples/python/attention_layer.py [entropy.png]   (PYTHONPATH=<build>/python, or pip install ./python)

Needs PyTorch (Debian: python3-torch) and, for the plot, matplotlib (python3-matplotlib); exits
with 77 (CTest's "skipped") when one is missing.
"""

import math
import sys

try:
    import torch
except ImportError:
    print("this example needs PyTorch (Debian: python3-torch)")
    sys.exit(77)

import ropex

PRETRAINED, FACTOR = 2048, 8.0
LENGTHS = [512, 1024, 2048, 4096, 8192, 16384]
QUERIES = 8  # entropy is averaged over the last QUERIES positions and the heads


class Attention(torch.nn.Module):
    def __init__(self, hidden, heads, kv_heads, rope):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, rope.head_dim
        self.qkv = torch.nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.out = torch.nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.rope = rope

    def project(self, x):
        """The fused projection [tokens, heads + 2 kv_heads, head_dim]."""
        return self.qkv(x).view(x.shape[0], self.heads + 2 * self.kv_heads, self.head_dim)

    def rotate(self, qkv, positions, hf_rope=None):
        """q, k, v [tokens, heads, head_dim]: views into qkv, q and k rotated."""
        q = qkv[:, :self.heads]
        k = qkv[:, self.heads:self.heads + self.kv_heads]
        v = qkv[:, self.heads + self.kv_heads:]
        if hf_rope is None:
            self.rope.apply(q, k, positions)                     # in place, inside qkv
        else:
            q, k = hf_rope(q, positions), hf_rope(k, positions)
        return q, k, v

    def attention(self, q, k, queries):
        """Causal softmax attention of the last `queries` rows of q over all of k: [heads, queries, tokens]."""
        tokens = k.shape[0]
        q = q[tokens - queries:].transpose(0, 1)                 # [heads, queries, head_dim]
        k = k.transpose(0, 1).repeat_interleave(self.heads // self.kv_heads, dim=0)  # GQA
        scores = q @ k.transpose(1, 2) / math.sqrt(self.head_dim)
        future = torch.arange(tokens)[None, :] > torch.arange(tokens - queries, tokens)[:, None]
        return scores.masked_fill(future, -math.inf).softmax(-1)

    def forward(self, x, positions, hf_rope=None):
        q, k, v = self.rotate(self.project(x), positions, hf_rope)
        tokens = x.shape[0]
        attention = self.attention(q, k, tokens)
        v = v.transpose(0, 1).repeat_interleave(self.heads // self.kv_heads, dim=0)
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


def compare_with_hf():
    base, head_dim = 500000.0, 64
    rope = ropex.RotaryEmbedding(head_dim=head_dim, base=base)
    layer = Attention(hidden=256, heads=8, kv_heads=2, rope=rope)
    x = torch.randn(48, 256)
    print(f"ropex {ropex.__version__}, kernel {ropex.kernel_isa()}; {rope}")
    for start in (0, 1 << 20, (1 << 24) - 48):
        positions = torch.arange(start, start + 48)
        ours, attention = layer(x, positions)
        theirs, _ = layer(x, positions, hf_rope=hf_float32_rope(base, head_dim))
        entropy = ropex.entropy(attention[:, -1])  # last query's attention, per head (a NumPy array)
        print(f"positions {start:>9}..: max |ropex - HF float32| = {(ours - theirs).abs().max().item():.2e}, "
              f"last-query attention entropy {entropy.mean():.4f} nats")
    # Relative positions are what attention sees: shifting every position by 2^20 changes nothing
    # with exact angles.
    near, _ = layer(x, torch.arange(48))
    far, _ = layer(x, torch.arange(48) + (1 << 20))
    print(f"output change when all positions move by 2^20: {(near - far).abs().max().item():.2e}")


POLICIES = {
    "plain": ropex.Plain(),
    "linear (PI)": ropex.Linear(factor=FACTOR),
    "NTK": ropex.NTK(factor=FACTOR),
    "dynamic NTK": ropex.DynamicNTK(factor=FACTOR, max_position=PRETRAINED),
    "YaRN": ropex.Yarn(factor=FACTOR, original_max_position=PRETRAINED),
    "Llama 3": ropex.Llama3(factor=FACTOR, original_max_position=PRETRAINED),
}


def entropy_per_policy():
    """{policy name: [mean last-query attention entropy at each of LENGTHS]} of one layer."""
    hidden, head_dim = 128, 64
    layer = Attention(hidden=hidden, heads=4, kv_heads=1, rope=ropex.RotaryEmbedding(head_dim=head_dim))
    mean = torch.randn(hidden) * 3.0
    # The projection does not depend on positions: made once, copied for each rotation.
    projected = layer.project(mean + torch.randn(LENGTHS[-1], hidden))
    table = {}
    for name, policy in POLICIES.items():
        table[name] = []
        for n in LENGTHS:
            # seq_len picks the dynamic NTK base; the other policies ignore it.
            layer.rope = ropex.RotaryEmbedding(head_dim=head_dim, policy=policy, base=10000.0, seq_len=n)
            q, k, _ = layer.rotate(projected[:n].clone(), torch.arange(n))
            attention = layer.attention(q, k, QUERIES)
            table[name].append(float(ropex.entropy(attention).mean()))
    return table


def plot(table, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (Debian: python3-matplotlib): no plot")
        sys.exit(77)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, values in table.items():
        ax.plot(LENGTHS, values, marker="o", label=name)
    ax.plot(LENGTHS, [math.log(n) for n in LENGTHS], "k:", label="uniform (ln n)")
    ax.axvline(PRETRAINED, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"context length (pretrained {PRETRAINED}, extended {FACTOR:g}x)")
    ax.set_ylabel("attention entropy (nats)")
    ax.set_title("ropex in a torch attention layer: attention entropy per RoPE policy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "attention_entropy.png"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with torch.no_grad():
        compare_with_hf()
        table = entropy_per_policy()
    print(f"\nmean attention entropy (nats) of the last {QUERIES} queries; uniform would be ln n")
    print(f"{'context':>12}" + "".join(f"{n:>9}" for n in LENGTHS))
    for name, values in table.items():
        print(f"{name:>12}" + "".join(f"{v:9.3f}" for v in values))
    plot(table, out)


if __name__ == "__main__":
    main()
