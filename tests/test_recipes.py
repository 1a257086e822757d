"""The recipe registry: every named recipe defined once, variants by field, one --set parser."""

from __future__ import annotations

import json

import pytest

from repro.decode.settings import DecodeSettings
from repro.errors import ConfigError
from repro.model import TABLE3_ROWS
from repro.pipeline.parsing_recipe import on_prepared_data
from repro.recipes import RECIPES, get_recipe, parse_assignments, recipe_names
from repro.train.config import TrainConfig
from repro.train.schedule import learning_rate, paper_peak_scale


def test_every_named_recipe_exists():
    names = set(RECIPES)
    assert {"base", "big", "big-enfr", "base-enfr", "parser-wsj", "parser-semi", "local", "local-parsing",
            "smoke"} <= names
    assert {f"table3-{row}" for row in TABLE3_ROWS} <= names
    assert get_recipe("paper") is get_recipe("base") and get_recipe("paper-big") is get_recipe("big")
    with pytest.raises(ConfigError, match="unknown recipe 'nope'"):
        get_recipe("nope")
    assert "paper" in recipe_names()


def test_the_paper_recipes():
    base, big, enfr = get_recipe("base"), get_recipe("big"), get_recipe("big-enfr")
    assert (base.train.max_steps, base.train.average_last, base.train.warmup_steps) == (100_000, 5, 4000)
    assert (big.train.max_steps, big.train.average_last, big.model.dropout) == (300_000, 20, 0.3)
    assert (enfr.model.dropout, enfr.train.vocab_size, enfr.train.dataset) == (0.1, 32000, "wmt14-en-fr")
    assert (base.decode.beam_size, base.decode.alpha, base.decode.max_len_offset) == (4, 0.6, 50)
    for name in ("table3-base", "table3-A-h1", "table3-big"):
        assert get_recipe(name).train.average_last == 1  # Table 3: no checkpoint averaging
    assert get_recipe("table3-D-ls0.2").train.label_smoothing == 0.2
    assert get_recipe("table3-big").train.max_steps == 300_000


def test_table4_recipes_use_section_6_3_settings(tiny_parsing_data):
    for name, vocab in (("parser-wsj", 16000), ("parser-semi", 32000)):
        recipe = get_recipe(name)
        d = recipe.decode
        assert (d.beam_size, d.alpha, d.max_len_offset) == (21, 0.3, 300)
        assert recipe.train.vocab_size == vocab and recipe.train.bpe_split == "word-level"  # issue 18
        assert (recipe.model.n_layers, recipe.model.d_model) == (4, 1024)
        assert recipe.train.lr_scale == 1.0  # the paper's scale: Eq. 3 exactly
    local = on_prepared_data(get_recipe("local-parsing").replace(targets="symbols"), tiny_parsing_data)
    assert local.train.train_src.endswith("train.src") and local.train.dev_tgt.endswith("dev.tgt")
    assert local.decode == get_recipe("parser-wsj").decode and local.model.d_model == 128
    assert local.train.bpe_split == "word-level"
    peak = learning_rate(local.train.warmup_steps, 128, local.train.warmup_steps, local.train.lr_scale)
    # twice the rate rule (the base model's peak, 7.0e-4), as measured ahead of the rule (reports/notes/2026-11-24-parser-issue18.md, item 5)
    assert peak == pytest.approx(2 * 512**-0.5 * 4000**-0.5)
    assert (local.model.n_layers, local.train.vocab_size) == (1, 4000)


def test_recipe_target_units_route_and_must_match_the_prepared_folder(tiny_parsing_data):
    assert get_recipe("parser-wsj").targets == "symbols" and get_recipe("local-parsing").targets == "per-word"
    assert parse_assignments(["targets=symbols"]) == {"targets": "symbols"}  # bare text, as dataset=...
    recipe = get_recipe("local-parsing").replace(targets="symbols")
    assert recipe.targets == "symbols" and recipe.to_dict()["targets"] == "symbols"
    with pytest.raises(ConfigError, match="field 'targets' must be one of symbols, per-word, got 'words'"):
        recipe.replace(targets="words")
    on_prepared_data(recipe, tiny_parsing_data)  # a folder without a manifest holds symbols
    with pytest.raises(ConfigError, match=r"manifest.json: the folder holds 'symbols' target tokens, recipe "
                                          r"local-parsing trains on 'per-word'"):
        on_prepared_data(get_recipe("local-parsing"), tiny_parsing_data)


def test_paper_peak_rule():
    assert paper_peak_scale(512, 4000) == pytest.approx(1.0)
    assert paper_peak_scale(128, 300) == pytest.approx(0.1369, abs=1e-4)
    for d, w in ((64, 50), (256, 1000), (1024, 8000)):
        peak = max(learning_rate(s, d, w, paper_peak_scale(d, w)) for s in range(1, 3 * w))
        assert peak == pytest.approx(6.99e-4, rel=1e-3)


def test_replace_routes_each_field_to_its_class():
    recipe = get_recipe("local").replace(d_model=128, warmup_steps=100, beam_size=8, name="mine")
    assert recipe.name == "mine" and recipe.train.warmup_steps == 100 and recipe.decode.beam_size == 8
    assert recipe.model.d_model == 128 and recipe.train.model_overrides["n_layers"] == 3  # merged, not replaced
    merged = get_recipe("local").replace(model_overrides={"n_layers": 2})
    assert merged.model.n_layers == 2 and merged.model.d_model == 256
    with pytest.raises(ConfigError, match="unknown field.*warmup"):
        get_recipe("local").replace(warmup=5)
    with pytest.raises(ConfigError, match="divisible"):
        get_recipe("local").replace(n_heads=3)  # a bad model is refused when the variant is made


def test_assignments_parse_json_and_refuse_what_is_not():
    assert parse_assignments(["max_steps=3", "dataset=wmt14-en-de", 'model_overrides={"n_layers": 2}']) == {
        "max_steps": 3, "dataset": "wmt14-en-de", "model_overrides": {"n_layers": 2}}
    with pytest.raises(ConfigError, match="field 'model_overrides' must be JSON"):
        parse_assignments(["model_overrides={n_layers:2"])
    with pytest.raises(ConfigError, match="expected FIELD=VALUE"):
        parse_assignments(["max_steps"])


def test_recipe_round_trips_as_json():
    for recipe in RECIPES.values():
        data = json.loads(json.dumps(recipe.to_dict()))
        assert TrainConfig.from_dict(data["train"]) == recipe.train
        assert DecodeSettings(**data["decode"]) == recipe.decode
