#!/usr/bin/env python3
"""Trains a small byte-level RoPE transformer in Hugging Face Llama layout on the CPU and writes
config.json, model.safetensors (written directly, no safetensors package), tokenizer.json (byte-level
BPE without merges: one token per byte) and train-log.txt into --out.

The model is HF LlamaForCausalLM in every tensor name and formula (RMSNorm, rotate_half RoPE,
SwiGLU, GQA, optionally tied embeddings), so ropex's loader, transformers and llama.cpp's converter
read it alike. Tasks, mixed per batch:
  lm       next-byte prediction on real text from a Debian package (default: the licence texts of
           base-files, /usr/share/common-licenses; the last tenth, MPL-1.1's end and MPL-2.0, is
           held out for validation);
  copy     induction: a random 8-24 character string placed in the text and repeated at the end;
           the loss on the repeat (x --answer-weight) rewards copying what followed an earlier
           match, the mechanism passkey retrieval needs (Olsson et al. 2022);
  passkey  the same text as haystack with the needle (default " @NNNNN. ") at a random depth and the
           question (default " @") at the end, then the key; the loss covers the whole sequence,
           with --answer-weight extra weight on the key's digits. '@' never occurs in the text, so
           it marks the key uniquely and the question is short: at 64 bytes the haystack keeps 48.
The context length follows a curriculum (short to long), e.g. --curriculum 64:1500,128:3500
(length:steps). Learning rate: linear warm-up then cosine decay over all steps. Seeded throughout.

What makes retrieval learnable in minutes on a CPU (measured): half the sequences are copy
examples and the first stage is 64 bytes long, so a large share of every batch rewards induction;
the phase change (loss on the copied bytes falling from ~3.3 to ~0.3 nats within ~100 steps) came
after ~550 steps of 32 x 64. With 30% copy and 40% passkey (600 steps at 64 bytes, then 128),
950 steps showed no retrieval at all. One thread: on a shared 2-core machine OpenBLAS's two spinning
threads were 3-10x slower than one.

Run with Debian's Python (python3-torch); setup and timing notes are in scripts/train-tiny-model.
  /usr/bin/python3 python/train_tiny_model.py --out models/tiny-byte-llama
  /usr/bin/python3 python/train_tiny_model.py --smoke --out /tmp/smoke     # a few steps, tiny model
"""
import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# ---- the model ---------------------------------------------------------------------------------


class RMSNorm(torch.nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["head_dim"]
        self.heads, self.kv_heads, self.d = c["num_attention_heads"], c["num_key_value_heads"], d
        self.q_proj = torch.nn.Linear(c["hidden_size"], self.heads * d, bias=False)
        self.k_proj = torch.nn.Linear(c["hidden_size"], self.kv_heads * d, bias=False)
        self.v_proj = torch.nn.Linear(c["hidden_size"], self.kv_heads * d, bias=False)
        self.o_proj = torch.nn.Linear(self.heads * d, c["hidden_size"], bias=False)

    def forward(self, x, cos, sin):
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv_heads, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv_heads, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)  # HF repeat_kv: kv head g serves heads g*group..
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d)
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, n, self.heads * self.d))


class MLP(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = torch.nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.up_proj = torch.nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.down_proj = torch.nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Inner(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = torch.nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class TinyLlama(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Inner(c)
        if not c["tie_word_embeddings"]:
            self.lm_head = torch.nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        d = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d)),
                             persistent=False)

    def forward(self, ids):
        n = ids.shape[1]
        angles = torch.arange(n, dtype=torch.float64)[:, None] * self.inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().float(), angles.sin().float()
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        x = self.model.norm(x)
        w = self.model.embed_tokens.weight if self.c["tie_word_embeddings"] else self.lm_head.weight
        return x @ w.t()


# ---- files ---------------------------------------------------------------------------------------


def write_safetensors(path, tensors):
    """tensors: name -> float32 numpy array. Header padded to 8 bytes, data in name order."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """name -> float32 numpy array, for the F32 files write_safetensors writes."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise ValueError(f"{path}: tensor '{name}'.dtype {t['dtype']} (only F32 is read here)")
        begin, end = t["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(t["shape"]).copy()
    return out


def check_logits(model, out, study, say):
    """ropex-study logits on the written model against PyTorch on the same prompt."""
    ids = list(b"under the terms of this License @48213. and the @")
    got = json.loads(subprocess.check_output([study, "logits", "--model", out, "--tokens", ",".join(map(str, ids))]))["logits"]
    with torch.no_grad():
        want = model(torch.tensor([ids]))[0].numpy()
    diff = float(np.abs(np.array(got) - want).max())
    say(f"ropex-study logits vs PyTorch: max |diff| {diff:.3g} over {want.size} logits")
    if diff > 1e-3:
        sys.exit("logits disagree")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_tokenizer(path):
    """Byte-level BPE with no merges: token id = byte value."""
    b2u = bytes_to_unicode()
    tok = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "byte_fallback": False, "vocab": {b2u[b]: b for b in range(256)}, "merges": []}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)


def save(model, out, config):
    os.makedirs(out, exist_ok=True)
    tensors = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_tokenizer(os.path.join(out, "tokenizer.json"))


# ---- data ----------------------------------------------------------------------------------------


def load_text(paths):
    data = b""
    for p in paths:
        if os.path.isdir(p):
            for name in sorted(os.listdir(p)):
                full = os.path.join(p, name)
                if os.path.isfile(full) and not os.path.islink(full):
                    data += open(full, "rb").read() + b"\n\n"
        else:
            data += open(p, "rb").read()
    return data


def passkey_example(text, n, rng, depth=None, needle="{key}", question="", digits=5):
    """(ids, weights, answer_at, key): haystack from `text`, `needle` (with the key) at `depth` (0..1),
    `question` at the end, then the key as the answer; `n` bytes in all."""
    key = str(rng.randint(10 ** (digits - 1), 10 ** digits - 1))
    needle_b, question_b, answer = needle.replace("{key}", key).encode(), question.encode(), key.encode()
    fill = n - len(needle_b) - len(question_b) - len(answer)
    if fill < 0:
        raise ValueError(f"length {n} is shorter than the passkey prompt ({n - fill} bytes)")
    start = rng.randint(0, len(text) - fill - 1)
    hay = text[start:start + fill]
    at = int(fill * (rng.random() if depth is None else depth))
    seq = hay[:at] + needle_b + hay[at:] + question_b + answer
    weights = [1.0] * len(seq)
    return list(seq), weights, len(seq) - len(answer), key


def copy_example(text, n, rng):
    """(ids, weights): text with a random string at a random place and again near the end."""
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
    k = rng.randint(8, 24)
    s = bytes(rng.choice(alphabet) for _ in range(k))
    fill = n - 2 * k - 2
    start = rng.randint(0, len(text) - fill - 1)
    hay = text[start:start + fill]
    at = rng.randint(0, max(0, fill - 8))
    seq = hay[:at] + b" " + s + hay[at:] + b" " + s
    w = [1.0] * len(seq)
    return list(seq), w, len(seq) - k


def batch(text, n, size, passkey_fraction, answer_weight, rng, copy_fraction=0.0, fmt=None):
    ids, weights = [], []
    for _ in range(size):
        r = rng.random()
        if r < copy_fraction:
            seq, w, repeat_at = copy_example(text, n + 1, rng)
            for i in range(repeat_at + 1, len(seq)):  # the first character of the repeat is a guess
                w[i] = answer_weight
        elif r < copy_fraction + passkey_fraction:
            seq, w, answer_at, key = passkey_example(text, n + 1, rng, **fmt)
            for i in range(answer_at, answer_at + len(key)):
                w[i] = answer_weight
        else:
            s = rng.randint(0, len(text) - n - 2)
            seq, w = list(text[s:s + n + 1]), [1.0] * (n + 1)
        ids.append(seq)
        weights.append(w)
    t = torch.tensor(ids, dtype=torch.long)
    return t[:, :-1], t[:, 1:], torch.tensor(weights)[:, 1:]


def unigram_bits(train, val):
    counts = np.bincount(np.frombuffer(train, dtype=np.uint8), minlength=256) + 1.0
    p = counts / counts.sum()
    v = np.frombuffer(val, dtype=np.uint8)
    return float(-np.log(p[v]).mean())


@torch.no_grad()
def heldout_loss(model, val, n):
    """(LM loss in nats/byte over all of `val` cut into windows of n bytes, windows, bytes scored).

    Every window predicts its bytes 2..n from those before them in the window; the tail shorter
    than a window is left out. Deterministic, unlike evaluate's sampled windows."""
    windows = len(val) // n
    ids = torch.tensor(list(val[:windows * n]), dtype=torch.long).view(windows, n)
    total = 0.0
    for rows in ids.split(32):
        total += F.cross_entropy(model(rows[:, :-1]).reshape(-1, 256), rows[:, 1:].reshape(-1), reduction="sum").item()
    scored = windows * (n - 1)
    return total / scored, windows, scored


@torch.no_grad()
def evaluate(model, val, n, rng, fmt, trials=20, depths=(0.0, 0.25, 0.5, 0.75, 1.0)):
    """(val LM loss in nats/byte on held-out text, {depth: exact-key accuracy by greedy decoding})."""
    model.eval()
    losses = []
    for _ in range(8):
        x, y, _ = batch(val, n, 8, 0.0, 1.0, rng)
        losses.append(F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1)).item())
    by_depth = {}
    for depth in depths:
        # Every example has length n, so the trials decode as one batch (one forward per key byte).
        examples = [passkey_example(val, n, rng, depth, **fmt) for _ in range(trials)]
        answer_at = examples[0][2]
        ids = torch.tensor([e[0][:answer_at] for e in examples])
        for _ in range(fmt["digits"]):
            ids = torch.cat((ids, model(ids)[:, -1].argmax(-1, keepdim=True)), dim=1)
        by_depth[depth] = sum(bytes(row[answer_at:].tolist()).decode("latin-1") == e[3]
                              for row, e in zip(ids, examples)) / trials
    model.train()
    return sum(losses) / len(losses), by_depth


# ---- main ----------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--text", nargs="*", default=["/usr/share/common-licenses"])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=384)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--curriculum", default="64:1500,128:3500", help="length:steps,...")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--passkey-fraction", type=float, default=0.3)
    ap.add_argument("--copy-fraction", type=float, default=0.5)
    ap.add_argument("--answer-weight", type=float, default=5.0)
    ap.add_argument("--needle", default=" @{key}. ", help="the needle; {key} becomes the key")
    ap.add_argument("--question", default=" @", help="the question after the haystack; the key follows it")
    ap.add_argument("--key-digits", type=int, default=5)
    ap.add_argument("--eval-trials", type=int, default=20, help="passkey trials per depth at each evaluation")
    ap.add_argument("--final-trials", type=int, default=100, help="passkey trials per depth at the end")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--smoke", action="store_true", help="a tiny model, a few steps: checks the pipeline only")
    ap.add_argument("--check-logits", metavar="ROPEX_STUDY", help="compare ropex-study logits on the written model")
    ap.add_argument("--heldout-loss", action="store_true",
                    help="with --check-only: the LM loss over the whole held-out tenth of --text, in windows "
                         "of max_position_embeddings bytes, and the unigram baseline")
    ap.add_argument("--check-only", action="store_true",
                    help="no training: load --out's config.json and model.safetensors and run --check-logits "
                         "and/or --heldout-loss")
    a = ap.parse_args()
    if a.check_only:
        if not a.check_logits and not a.heldout_loss:
            sys.exit("--check-only needs --check-logits ROPEX_STUDY or --heldout-loss")
        torch.set_num_threads(a.threads)
        config = json.load(open(os.path.join(a.out, "config.json")))
        model = TinyLlama(config)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in read_safetensors(os.path.join(a.out, "model.safetensors")).items()})
        model.eval()
        if a.check_logits:
            check_logits(model, a.out, a.check_logits, print)
        if a.heldout_loss:
            text = load_text(a.text)
            split = int(len(text) * 0.9)  # the training split
            train, val = text[:split], text[split:]
            n = config["max_position_embeddings"]
            loss, windows, scored = heldout_loss(model, val, n)
            print(f"held-out loss: {loss:.4f} nats/byte over {windows} windows of {n} ({scored} bytes scored) "
                  f"of the last {len(val)} bytes of {a.text}; unigram baseline {unigram_bits(train, val):.3f}")
        return
    if a.smoke:
        a.hidden, a.layers, a.heads, a.kv_heads, a.intermediate = 32, 2, 4, 2, 64
        a.curriculum, a.batch, a.eval_every, a.warmup = "96:3,128:3", 4, 1000, 2

    fmt = {"needle": a.needle, "question": a.question, "digits": a.key_digits}
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    torch.set_num_threads(a.threads)
    stages = [(int(n), int(s)) for n, s in (x.split(":") for x in a.curriculum.split(","))]
    total = sum(s for _, s in stages)
    length = stages[-1][0]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256,
              "hidden_size": a.hidden, "intermediate_size": a.intermediate, "num_hidden_layers": a.layers,
              "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "head_dim": a.hidden // a.heads,
              "hidden_act": "silu", "max_position_embeddings": length, "rms_norm_eps": 1e-5,
              "rope_theta": a.rope_theta, "rope_scaling": None, "tie_word_embeddings": True,
              "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
              "bos_token_id": None, "eos_token_id": None}
    text = load_text(a.text)
    split = int(len(text) * 0.9)
    train, val = text[:split], text[split:]
    model = TinyLlama(config)
    for name, p in model.named_parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.02)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    params = sum(p.numel() for p in model.parameters())
    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "train-log.txt"), "w")

    def say(msg):
        print(msg)
        log.write(msg + "\n")
        log.flush()

    baseline = unigram_bits(train, val)
    say(f"params {params}, text {len(text)} bytes from {a.text}, unigram baseline {baseline:.3f} nats/byte")
    say(f"args {vars(a)}; torch {torch.__version__}, threads {torch.get_num_threads()}")
    step, start = 0, time.time()
    for n, steps in stages:
        for _ in range(steps):
            lr = a.lr * min(1.0, (step + 1) / a.warmup) * 0.5 * (1 + math.cos(math.pi * step / total))
            for g in opt.param_groups:
                g["lr"] = lr
            x, y, w = batch(train, n, a.batch, a.passkey_fraction, a.answer_weight, rng, a.copy_fraction, fmt)
            loss_all = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1), reduction="none")
            loss = (loss_all * w.reshape(-1)).sum() / w.sum()
            answers = w.reshape(-1) > 1  # the copied bytes and the keys: where induction shows first
            answer_loss = (loss_all[answers].mean().item() if answers.any() else float("nan"))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 50 == 0 or step == total:
                say(f"step {step}/{total} len {n} loss {loss.item():.4f} answer loss {answer_loss:.3f} lr {lr:.2e} {time.time() - start:.0f}s")
            if step % a.eval_every == 0 or step == total:
                final = step == total
                trials = 4 if a.smoke else a.final_trials if final else a.eval_trials
                depths = tuple(d / 10 for d in range(11)) if final else (0.0, 0.25, 0.5, 0.75, 1.0)
                val_loss, acc = evaluate(model, val, n, rng, fmt, trials, depths)
                mean = sum(acc.values()) / len(acc)
                say(f"eval step {step} len {n}: val loss {val_loss:.4f} nats/byte (unigram {baseline:.3f}), "
                    f"passkey accuracy {mean:.3f}, by depth {acc}"
                    + (f" ({trials} trials per depth)" if final else ""))
    save(model, a.out, config)
    say(f"wrote {a.out} after {time.time() - start:.0f}s")
    if a.check_logits:
        check_logits(model, a.out, a.check_logits, say)


if __name__ == "__main__":
    main()
