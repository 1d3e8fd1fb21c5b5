"""Attention entropy against context length, one curve per RoPE scaling policy (matplotlib).

Synthetic but reproducible: keys and queries share a mean direction plus Gaussian noise (so the
unrotated logits favour no position), RoPE is applied with ropex, and the entropy of the last
queries' softmax attention is averaged. A model pretrained at 4096 positions is extended 8x by each
policy; YaRN's attention factor sharpens the distribution, interpolation changes how fast RoPE's
long-term decay sets in. After "Understanding the RoPE Extensions of Long-Context LLMs: An
Attention Perspective" (COLING 2025), Algorithm 1.

    python3 examples/python/entropy_per_policy.py [out.png]
"""

import math
import sys

import numpy as np

import ropex

PRETRAINED, FACTOR, HEAD_DIM, BASE = 4096, 8.0, 128, 10000.0
LENGTHS = [1024, 2048, 4096, 8192, 16384, 32768]
QUERIES = 8

POLICIES = {
    "plain": ropex.Plain(),
    "linear (PI)": ropex.Linear(factor=FACTOR),
    "NTK": ropex.NTK(factor=FACTOR),
    "dynamic NTK": ropex.DynamicNTK(factor=FACTOR, max_position=PRETRAINED),
    "YaRN": ropex.Yarn(factor=FACTOR, original_max_position=PRETRAINED),
    "Llama 3": ropex.Llama3(factor=FACTOR, original_max_position=PRETRAINED),
}


def mean_entropy(policy, length, keys, queries):
    # Dynamic NTK depends on the sequence length; the others do not.
    rope = ropex.RotaryEmbedding(head_dim=HEAD_DIM, policy=policy, base=BASE, seq_len=length)
    k = keys[:length].copy()                       # [tokens, 1 head, head_dim]
    q = queries.copy()
    positions = np.arange(length - QUERIES, length)
    rope.apply(k, np.arange(length))
    rope.apply(q, positions)
    logits = q[:, 0] @ k[:, 0].T / math.sqrt(HEAD_DIM)      # [queries, length]
    logits[np.arange(length)[None, :] > positions[:, None]] = -np.inf  # causal
    return float(np.mean(ropex.entropy(ropex.softmax(logits))))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "attention_entropy.png"
    rng = np.random.default_rng(0)
    mean = rng.normal(size=HEAD_DIM) * 0.6
    keys = (mean + rng.normal(size=(LENGTHS[-1], 1, HEAD_DIM))).astype(np.float32)
    queries = (mean + rng.normal(size=(QUERIES, 1, HEAD_DIM))).astype(np.float32)

    table = {name: [mean_entropy(policy, n, keys, queries) for n in LENGTHS] for name, policy in POLICIES.items()}
    print("mean attention entropy (nats) of the last queries; uniform would be ln n")
    print(f"{'context':>12}" + "".join(f"{n:>9}" for n in LENGTHS))
    for name, values in table.items():
        print(f"{name:>12}" + "".join(f"{v:9.3f}" for v in values))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (Debian: python3-matplotlib): no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, values in table.items():
        ax.plot(LENGTHS, values, marker="o", label=name)
    ax.plot(LENGTHS, [math.log(n) for n in LENGTHS], "k:", label="uniform (ln n)")
    ax.axvline(PRETRAINED, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length (pretrained 4096, extended 8x)")
    ax.set_ylabel("attention entropy (nats)")
    ax.set_title(f"ropex: attention entropy per RoPE policy (head_dim {HEAD_DIM}, base {BASE:g})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
