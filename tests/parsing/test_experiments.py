"""Table 4's Transformer rows as experiment definitions; scoring decoded output (Section 6.3)."""

from __future__ import annotations

import pytest

from repro.errors import ConfigError, DataError
from repro.model import get_preset
from repro.parsing.evaluate import score_outputs
from repro.parsing.experiments import EXPERIMENTS, get_experiment
from repro.parsing.linearize import linearize
from repro.parsing.trees import read_tree_lines, tree_to_line, write_tree_lines
from nltk import Tree


def _prepared(tmp_path, trees):
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.src").write_text("".join(" ".join(t.leaves()) + "\n" for t in trees))
        (tmp_path / f"{split}.tgt").write_text("".join(linearize(t) + "\n" for t in trees))
        (tmp_path / f"{split}.trees").write_text(write_tree_lines(trees))
    return tmp_path


TREES = [Tree.fromstring(s) for s in ("(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)) (. .))",
                                      "(S (NP (PRP it)) (VP (VBZ rains) (ADVP (RB hard))) (, ,))")]


def test_table4_rows_use_section_6_3_settings(tmp_path):
    prepared = _prepared(tmp_path, TREES)
    for name, vocab, claim in (("parser-wsj", 16000, "table4.f1.wsj-only"),
                               ("parser-semi", 32000, "table4.f1.semi")):
        exp = get_experiment(name)
        assert (exp.decode.beam_size, exp.decode.alpha, exp.decode.max_len_offset) == (21, 0.3, 300)
        assert exp.vocab_size == vocab and exp.claim_id == claim and exp.scale == "cluster"
        model = get_preset(exp.preset).model
        assert (model.n_layers, model.d_model) == (4, 1024)
    cfg = get_experiment("parser-wsj").train_config(prepared, tmp_path / "run")
    assert cfg.vocab_size == 16000 and cfg.train_src.endswith("train.src") and cfg.dev_tgt.endswith("dev.tgt")
    assert cfg.model_config(cfg.vocab_size).n_layers == 4


def test_semi_supervised_row_requires_the_user_corpus(tmp_path):
    prepared = _prepared(tmp_path, TREES)
    exp = get_experiment("parser-semi")
    with pytest.raises(ConfigError, match="17M sentences.*not available"):
        exp.train_config(prepared, tmp_path / "run")
    cfg = exp.train_config(prepared, tmp_path / "run", semi_src=tmp_path / "semi.src", semi_tgt=tmp_path / "semi.tgt")
    assert cfg.train_src.endswith("semi.src") and cfg.dev_src.endswith("dev.src")


def test_local_experiment_and_unknown_name(tmp_path):
    exp = EXPERIMENTS["parser-sample"]
    assert exp.scale == "local" and exp.claim_id is None
    cfg = exp.train_config(_prepared(tmp_path, TREES), tmp_path / "run", max_steps=5)
    assert cfg.max_steps == 5 and cfg.device == "cpu" and cfg.bpe_split == "words"  # tree symbols stay whole
    with pytest.raises(ConfigError, match="unknown parsing experiment"):
        get_experiment("parser-xyz")


def test_scoring_decoded_output(tmp_path):
    gold = _prepared(tmp_path, TREES) / "test.trees"
    perfect = score_outputs([linearize(t) for t in TREES], gold)
    assert perfect.f1 == 100.0 and perfect.repaired == 0
    assert perfect.leaf_count == {"exact": 2, "too_few": 0, "too_many": 0}
    broken = score_outputs(["(S (NP XX XX", ""], gold, write_trees=tmp_path / "out.trees")
    assert broken.repaired == 2 and broken.evalb.all.error_sentences == 0
    assert broken.evalb.all.valid_sentences == 2
    assert broken.leaf_count == {"exact": 0, "too_few": 2, "too_many": 0}  # 2 of 4 words, then none of 4
    assert score_outputs(["(S XX XX XX XX XX )S", "(S XX XX XX XX )S"], gold).leaf_count == {
        "exact": 1, "too_few": 0, "too_many": 1}
    written = read_tree_lines(tmp_path / "out.trees")
    assert [t.leaves() for t in written] == [t.leaves() for t in TREES]
    assert tree_to_line(written[1]) == "(TOP (PRP it) (VBZ rains) (RB hard) (, ,))"
    with pytest.raises(DataError, match="1 parser outputs for 2 gold trees"):
        score_outputs(["(S XX )S"], gold)
