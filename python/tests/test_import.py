"""load_hf_config: a file, a model directory or a dict -> ModelRope."""

import json
import pathlib
import shutil

import numpy as np
import pytest

import ropex

DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "hf"

QWEN_YARN = {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1000000.0,
             "max_position_embeddings": 32768,
             "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}


def test_from_a_dict():
    m = ropex.load_hf_config(QWEN_YARN)
    assert isinstance(m, ropex.ModelRope)
    assert (m.config.head_dim, m.config.rotary_dim, m.config.base, m.config.layout) == (128, 128, 1e6, "half")
    assert m.policy == ropex.Yarn(factor=4.0, original_max_position=32768)
    assert m.max_position == 32768 and m.softmax_scale_multiplier == 1.0
    assert m.model_type == "qwen2" and m.rope_type == "yarn" and m.mrope_section is None
    rope = m.rotary_embedding()
    assert rope.attention_factor == pytest.approx(1.1386294361)
    assert "Yarn(factor=4.0" in repr(m)


def test_from_a_path_and_a_directory(tmp_path):
    path = DATA / "qwen2.5-7b-instruct-yarn.json"
    by_path = ropex.load_hf_config(path)
    by_str = ropex.load_hf_config(str(path))
    shutil.copy(path, tmp_path / "config.json")
    by_dir = ropex.load_hf_config(tmp_path)
    assert by_path.policy == by_str.policy == by_dir.policy == ropex.Yarn(factor=4.0, original_max_position=32768)


def test_deepseek_v3():
    m = ropex.load_hf_config(DATA / "deepseek-v3.json")
    assert (m.config.head_dim, m.config.layout) == (64, "interleaved")
    assert isinstance(m.policy, ropex.Yarn) and m.policy.factor == 40.0
    assert m.softmax_scale_multiplier == pytest.approx(1.87385, rel=1e-5)
    assert m.rotary_embedding().attention_factor == 1.0


def test_llama31_and_phi3():
    llama = ropex.load_hf_config(DATA / "llama-3.1-8b.json")
    assert llama.policy == ropex.Llama3(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                        original_max_position=8192)
    assert llama.config.base == 500000.0
    phi = ropex.load_hf_config(DATA / "phi-3-mini-128k-instruct.json")
    assert isinstance(phi.policy, ropex.LongRoPE) and len(phi.policy.short_factor) == 48
    assert phi.rotary_embedding().attention_factor == pytest.approx(1.1902380714)
    short = phi.rotary_embedding(seq_len=4096).inv_freq
    long = phi.rotary_embedding(seq_len=4097).inv_freq
    assert not np.allclose(short, long)


def test_layout_override():
    m = ropex.load_hf_config(QWEN_YARN, layout="interleaved")
    assert m.config.layout == "interleaved"


def test_errors_name_the_key(tmp_path):
    bad = json.loads(json.dumps(QWEN_YARN))
    bad["rope_scaling"]["factor"] = -2.0
    with pytest.raises(ValueError, match="rope_scaling.factor must be > 0"):
        ropex.load_hf_config(bad)
    with pytest.raises(ValueError, match="cannot be opened"):
        ropex.load_hf_config(tmp_path / "missing.json")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        ropex.load_hf_config(tmp_path)
