"""Policies: Hugging Face defaults, keyword arguments, validation and repr."""

import math

import pytest

import ropex


def test_defaults_are_hugging_face_defaults():
    assert ropex.Linear().factor == 1.0 and ropex.NTK().factor == 1.0
    d = ropex.DynamicNTK()
    assert (d.factor, d.max_position) == (1.0, 2048)
    y = ropex.Yarn()
    assert (y.factor, y.original_max_position, y.beta_fast, y.beta_slow) == (1.0, 2048, 32.0, 1.0)
    assert (y.mscale, y.mscale_all_dim, y.truncate, y.attention_factor) == (0.0, 0.0, True, 1.0)
    l3 = ropex.Llama3()
    assert (l3.factor, l3.low_freq_factor, l3.high_freq_factor, l3.original_max_position) == (8.0, 1.0, 4.0, 8192)
    lr = ropex.LongRoPE([1.0], [2.0])
    assert (lr.factor, lr.original_max_position, lr.attention_factor) == (1.0, 4096, 1.0)


def test_positional_and_keyword_arguments():
    assert ropex.Linear(4.0) == ropex.Linear(factor=4.0)
    assert ropex.DynamicNTK(2.0, 4096) == ropex.DynamicNTK(factor=2.0, max_position=4096)
    assert ropex.Yarn(4.0, 32768) == ropex.Yarn(factor=4.0, original_max_position=32768)
    assert ropex.Yarn(4.0) != ropex.Yarn(8.0)
    assert ropex.Plain() == ropex.Plain() and ropex.Plain() != ropex.Linear()
    assert len({ropex.Linear(2.0), ropex.Linear(2.0), ropex.NTK(2.0)}) == 2


def test_yarn_resolves_beta_and_attention_factor():
    # beta 0 means HF's default (HF reads them with `or`); the derived factor is 0.1 ln s + 1.
    y = ropex.Yarn(factor=4.0, beta_fast=0.0, beta_slow=0.0)
    assert (y.beta_fast, y.beta_slow) == (32.0, 1.0)
    assert y.attention_factor == pytest.approx(0.1 * math.log(4.0) + 1)
    assert ropex.Yarn(factor=4.0, attention_factor=1.5).attention_factor == 1.5
    deepseek = ropex.Yarn(factor=40.0, original_max_position=4096, mscale=1.0, mscale_all_dim=1.0)
    assert deepseek.attention_factor == 1.0


def test_longrope_attention_factor():
    lr = ropex.LongRoPE([1.0] * 48, [2.0] * 48, factor=32.0, original_max_position=4096)
    assert lr.attention_factor == pytest.approx(1.1902380714238083)  # Phi-3-mini-128k
    assert ropex.LongRoPE([1.0], [1.0], attention_factor=1.25).attention_factor == 1.25
    assert lr.short_factor == [1.0] * 48 and lr.long_factor == [2.0] * 48


@pytest.mark.parametrize("policy,text", [
    (ropex.Plain(), "Plain()"),
    (ropex.Linear(4.0), "Linear(factor=4.0)"),
    (ropex.NTK(8.0), "NTK(factor=8.0)"),
    (ropex.DynamicNTK(2.0, 4096), "DynamicNTK(factor=2.0, max_position=4096)"),
    (ropex.Yarn(4.0, 32768), "Yarn(factor=4.0, original_max_position=32768, beta_fast=32.0, beta_slow=1.0, "
                             "mscale=0.0, mscale_all_dim=0.0, attention_factor=1.138629436111989, truncate=True)"),
    (ropex.Llama3(), "Llama3(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position=8192)"),
    (ropex.LongRoPE([1.0, 1.5], [4.0, 8.0], factor=32.0),
     "LongRoPE(short_factor=[1.0, 1.5], long_factor=[4.0, 8.0], factor=32.0, original_max_position=4096, "
     "attention_factor=1.1902380714238083)"),
])
def test_repr_shows_resolved_values_and_round_trips(policy, text):
    assert repr(policy) == text
    assert eval(text, {k: getattr(ropex, k) for k in ropex.__all__}) == policy


@pytest.mark.parametrize("make,message", [
    (lambda: ropex.Linear(0.0), "linear.factor must be > 0"),
    (lambda: ropex.NTK(-1.0), "ntk.factor must be > 0"),
    (lambda: ropex.DynamicNTK(2.0, 0), "dynamic_ntk.max_position must be > 0"),
    (lambda: ropex.Yarn(factor=float("nan")), "yarn.factor must be finite"),
    (lambda: ropex.Yarn(factor=4.0, beta_fast=0.5, beta_slow=2.0), "yarn.beta_fast must be >= yarn.beta_slow"),
    (lambda: ropex.Llama3(low_freq_factor=4.0, high_freq_factor=1.0), "llama3.low_freq_factor must be <="),
    (lambda: ropex.LongRoPE([], []), "longrope.short_factor must not be empty"),
    (lambda: ropex.LongRoPE([1.0, 1.0], [1.0]), "longrope.long_factor must have rotary_dim/2 = 2 entries"),
    (lambda: ropex.LongRoPE([1.0, -1.0], [1.0, 1.0]), r"longrope.short_factor\[1\] must be > 0"),
])
def test_invalid_values_are_value_errors_naming_the_field(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_rope_type_names():
    assert [p.rope_type for p in (ropex.Plain(), ropex.Linear(), ropex.NTK(), ropex.DynamicNTK(), ropex.Yarn(),
                                  ropex.Llama3(), ropex.LongRoPE([1.0], [1.0]))] == \
        ["default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope"]


def test_policies_are_immutable():
    y = ropex.Yarn(4.0)
    with pytest.raises(AttributeError):
        y.factor = 8.0
