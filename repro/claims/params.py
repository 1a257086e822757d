"""What each checker takes in a claim's ``params``: the keys and their types, as JSON schemas.

A claim's ``params`` are settings of the measurement (sizes, trial counts, the experiment to
read), read by its checker under ``repro/checks/``. A key no checker reads (``trails = 5``) or
a value of the wrong type (``trials = "2"``, ``trials = 0``: nothing would run) is refused when
the claims are loaded, naming the file, the claim and the field. ``tests/claims/test_params.py``
checks that this table covers every registered checker and every key the checkers read.
"""

from __future__ import annotations

from typing import Any

from repro.claims.measure_names import MEASURES, MODEL_MEASURES, RUN_MEASURES, SPLITS

COUNT: dict[str, Any] = {"type": "integer", "minimum": 1}
OFFSET: dict[str, Any] = {"type": "integer", "minimum": 0}
COUNTS: dict[str, Any] = {"type": "array", "minItems": 1, "items": COUNT}
RATE: dict[str, Any] = {"type": "number", "minimum": 0, "exclusiveMaximum": 1}
POSITIVE: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0}
NON_NEGATIVE: dict[str, Any] = {"type": "number", "minimum": 0}
TEXT: dict[str, Any] = {"type": "string", "minLength": 1}
NUMBERS: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "number"}}

#: The paper's job a checker observes (``repro.checks.jobs``), and one of its runs (a Table 3 row).
_JOB = {"experiment": TEXT, "job": TEXT}
#: The search settings, the job whose evaluation search is watched and which of its settings
#: (the translation's or the parser's) a claim is about (``repro.checks.search_probe``).
_SEARCH = {"beam_size": COUNT, "alpha": NON_NEGATIVE, "max_len_offset": OFFSET, "experiment": TEXT,
           "settings": {"enum": ["translation", "parsing"]}}
_SEARCH_SIZES = {"beam_size": COUNT, "alpha": NON_NEGATIVE, "max_len_offset": OFFSET}
_ATTENTION_TIMING = {"batch": COUNT, "length": COUNT, "d_k": COUNT}
_WIDTHS = {"d_model": COUNT, "d_ff": COUNT}
_TABLE1_GRID = {"type": "object", "additionalProperties": COUNTS, "minProperties": 1}
_KERNEL_ROWS = {"type": "array", "minItems": 1,
                "items": {"type": "object", "additionalProperties": False, "required": ["n"],
                          "properties": {"k": COUNT, "n": COUNTS}}}

#: The paper's jobs a statement observed on a run is about (repro.observed.judge): a run standing for
#: another reads "needs another run".
_ABOUT = {"about": {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": {
    "experiment": {"type": "array", "minItems": 1, "items": TEXT},
    "job": {"type": "array", "minItems": 1, "items": TEXT},
    "model": {"type": "array", "minItems": 1, "items": {"enum": ["base", "big", "parser"]}},
    "pair": {"type": "array", "minItems": 1, "items": {"enum": ["en-de", "en-fr"]}},
    "table": {"type": "array", "minItems": 1, "items": {"enum": [2, 3, 4]}}}}}

#: checker name -> the params it reads (all optional unless listed in :data:`REQUIRED`).
PARAMS: dict[str, dict[str, Any]] = {
    "attention.additive_space": _ATTENTION_TIMING,
    "attention.additive_speed": {**_ATTENTION_TIMING, "repeats": COUNT},
    "attention.causal_mask": {},
    "attention.constant_compute": {"d_model": COUNT, "heads": COUNTS, "length": COUNT},
    "attention.eq1": {"trials": COUNT},
    "attention.eq1_paths": {"trials": COUNT},
    "attention.footnote4": {"samples": {"type": "integer", "minimum": 2}, "d_k": COUNTS, "d_model": COUNT,
                            "mean_bound": POSITIVE},
    "attention.saturation": {"d_k": COUNTS, "stable": POSITIVE},
    "attention.scores_in_model": {"d_model": COUNT, "heads": COUNTS},
    "attention.multihead_cost": {"d_model": COUNT, "heads": COUNT, "length": COUNT},
    "attention.multihead_positions": {"d_model": COUNT, "heads": COUNTS},
    "attention.weighted_sum": {"d_model": COUNT, "heads": COUNT},
    "bleu.paper_protocol": {},
    "bleu.case": {},
    "bleu.target_language": {"experiments": {"type": "array", "minItems": 1, "items": TEXT}},
    "evalb.rules": {},
    "parse.linearization": {},
    "scaled.table3_jobs": {"seeds": COUNT, "sizes": {"type": "array", "items": TEXT},
                           "paper_base": {"type": "object"}, "paper_rows": {"type": "object"}},
    "scaled.verdict_statistics": {"rel_tolerance": POSITIVE},
    "decode.eos_in_beam": _SEARCH,
    "decode.cached_every_architecture": {"presets": {"type": "array", "minItems": 1, "items": TEXT}},
    "decode.alpha": {**_SEARCH, "rounds": COUNT, "agreement": POSITIVE},
    "decode.beam_width": _SEARCH,
    "decode.dropout_off": _SEARCH,
    "decode.early_stop": _SEARCH,
    "decode.finished_stay_finished": _SEARCH,
    "decode.max_length": _SEARCH,
    "decode.trained_scores": {"experiment": TEXT},
    "decode.cut_scored": _SEARCH,
    "decode.ranking": _SEARCH,
    "decode.special_ids": _SEARCH,
    "dropout.embeddings": {"p": RATE},
    "dropout.residual": {"p": RATE},
    "embedding.scale": {"d_model": COUNT},
    "embedding.shared": {},
    "layers.distinct_parameters": {},
    "layers.encoder_decoder_attention": {},
    "layers.feed_forward": _WIDTHS,
    "layers.layer_norm": {"d_model": COUNT, "heads": COUNT},
    "layers.position_wise": _WIDTHS,
    "layers.post_norm": {"d_model": COUNT, "heads": COUNT},
    "layers.post_norm_decoder": {},
    # the measurement a job takes for the claim (repro.claims.measure_names), on which split of its data set;
    # preset: the Table 3 row the metric's run trains (for readers)
    "metric.result": {"preset": TEXT, "measure": {"enum": list(MODEL_MEASURES)}, "split": {"enum": list(SPLITS)}},
    "metric.step_time": {"measure": {"enum": list(RUN_MEASURES)}},
    "model.base_dimensions": _JOB,
    "model.encoder_all_positions": {},
    "model.incremental": {"beam": {"type": "object", "additionalProperties": False, "properties": _SEARCH_SIZES}},
    "model.padding_invariance": {},
    "model.stacks": {},
    "model.widths": {"d_model": COUNT},
    "positional.both_stacks": {},
    "positional.equations": {"d_models": COUNTS, "length": COUNT},
    "positional.layout": {"d_model": COUNT, "length": COUNT},
    "positional.relative_linear": {"d_model": COUNT, "length": COUNT, "offsets": COUNTS},
    "positional.wavelengths": {"d_model": COUNT, "length": COUNT},
    # a run's own records (repro check --run; repro/checks/observed_*.py)
    "observed.adam": _ABOUT,
    "observed.architecture": {**_ABOUT, "part": {"enum": ["norm", "sharing", "positions"]}},
    "observed.average": _ABOUT,
    "observed.average_spacing": _ABOUT,
    "observed.checkpoints": _ABOUT,
    "observed.corpus": _ABOUT,
    "observed.dimensions": _ABOUT,
    "observed.eq3": _ABOUT,
    "observed.hardware": _ABOUT,
    "observed.held_out": _ABOUT,
    "observed.label_smoothing_loss": _ABOUT,
    "observed.metric": {"preset": TEXT, "measure": {"enum": list(MEASURES)}, "split": {"enum": list(SPLITS)}},
    "observed.protocol": _ABOUT,
    "observed.search": {**_ABOUT, "setting": {"enum": ["beam_size", "alpha", "max_len_offset", "stop"]}},
    "observed.setting": {**_ABOUT, "key": {"enum": ["dropout", "label_smoothing"]}},
    "observed.test_set": {**_ABOUT, "dataset": TEXT, "split": {"enum": list(SPLITS)}},
    "observed.tokens": _ABOUT,
    "observed.train_time": {**_ABOUT, "per_s": COUNT},
    "observed.updates": _ABOUT,
    "observed.vocabulary": {**_ABOUT, "kind": {"enum": ["byte-pair encoding", "word-piece", "word-level"]}},
    "observed.warmup": _ABOUT,
    "recipe.value": {"key": TEXT},
    "relation.expression": {"expression": TEXT, "constants": NUMBERS},
    # issue 38: the run's arithmetic, checkpoints, runtime and records (repro/checks/update_arithmetic.py ...)
    "run.auto_precision": {"experiment": TEXT},
    "run.bleu_stored": {},
    "run.checkpoints_kept": _JOB,
    "run.ddp_rate": {},
    "run.ddp_update": {},
    "run.divergence_stop": {},
    "run.dropout_places": _JOB,
    "run.encoded_tokens": {"experiment": TEXT, "cap": COUNT},
    "run.encoded_cache_key": {"pairs": {"type": "integer", "minimum": 8}},
    "run.step_time_resumed": {"first": {"type": "integer", "minimum": 2}, "steps": COUNT},
    "run.gpu_optimizer": {"experiment": TEXT},
    "run.main_rank": {},
    "run.master_weights": {"experiment": TEXT},
    "run.nonfinite_stored": {},
    "run.norms_per_layer": _JOB,
    "run.rank_devices": {"experiment": TEXT},
    "run.resume_newest": _JOB,
    "run.resume_exact": {**_JOB, "updates": COUNT, "stop": COUNT},
    "run.shard_order": {},
    "run.resume_ranks": {},
    "run.sharded_perplexity": {},
    "run.vocabulary_size": _JOB,
    "parse.scoring": {},
    "step_time.normalisation": {"gpus": COUNT, "tflops": POSITIVE},
    "run.smoothing_spread": {"experiment": TEXT},
    "run.compiled_shapes": {"experiment": TEXT},
    "run.read_late": {"experiment": TEXT},
    "run.update_arithmetic": {"experiment": TEXT},
    "run.attention_maps": {"run_claim": TEXT},
    "run.batch_by_length": {"vocab_size": COUNT},
    "run.batch_order": {"vocab_size": COUNT},
    "run.batch_side_tokens": {"vocab_size": COUNT},
    "run.evaluation_average": {**_JOB, "extra_checkpoints": OFFSET},
    "run.job_dimensions": _JOB,
    "run.job_dropout": _JOB,
    "run.job_positions": _JOB,
    "run.job_steps": _JOB,
    "run.lengths_below_width": {"experiment": TEXT, "vocab_size": COUNT},
    "run.objective_smoothing": _JOB,
    "run.parser_training_size": {"experiment": TEXT},
    "run.parser_unchanged": {"experiment": TEXT, "base": TEXT},
    "run.position_extrapolation": {"experiment": TEXT},
    "run.update_gradient": {"experiment": TEXT},
    "run.perplexity_per_wordpiece": {},
    "run.shared_vocabulary": {},
    "run.pair_direction": {},
    "model.parameters_used": {},
    "figures.attention_drawn": {},
    "run.shifted_right": {},
    "run.tokens_per_update": {"experiment": TEXT, "devices": COUNT, "updates": COUNT, "vocab_size": COUNT,
                              "profile": TEXT, "max_tokens_per_device": COUNT},
    "section4.attention_vs_recurrent": {"d": COUNTS},
    "section4.convolution_factor_k": {"n": COUNT, "d": COUNT, "k": COUNTS},
    "section4.separable_convolution": {"n": COUNTS, "d": COUNTS},
    "table1.complexity": {"layer": TEXT, "grid": _TABLE1_GRID, "tolerance": POSITIVE},
    "table1.path": {"layer": TEXT, "n": COUNTS, "d": COUNT, "tolerance": POSITIVE, "grid": _KERNEL_ROWS, "r": COUNT,
                    "r_sweep": {"type": "object", "additionalProperties": False, "required": ["n", "r"],
                                "properties": {"n": COUNT, "r": COUNTS}}},
    "table1.sequential": {"layer": TEXT, "n": COUNTS, "d": COUNT, "k": COUNT, "r": COUNT},
    "table2.cost": {"hours": POSITIVE, "gpus": COUNT, "gpu": TEXT, "seconds_per_step": POSITIVE, "steps": COUNT},
    "table2.cost_from_run": {"step_time_claim": TEXT, "steps": COUNT},
    "table3.implied_vocabulary": {"grid": {"type": "array", "minItems": 3, "maxItems": 3, "items": POSITIVE},
                                  "paper_counts": NUMBERS},
    "table3.params_trained": {"vocab_size": COUNT, "rows": {"type": "array", "items": TEXT}},
    "table3.params": {"row": TEXT, "vocab_size": COUNT},
    "table3.params_difference": {"row": TEXT, "minus": TEXT, "vocab_size": COUNT},
    "training.adam": {"experiment": TEXT},
    "training.checkpoint_clock": {"recipe": TEXT, "seconds_per_update": POSITIVE, "updates": COUNT},
    "training.average_last": {"k": COUNT, "checkpoints": COUNT},
    "training.checkpoint_cadence": {"seconds_per_update": POSITIVE, "paper_seconds_per_update": POSITIVE,
                                    "updates": COUNT},
    "training.eq3": {"d_model": COUNT, "warmup": COUNT},
    "training.label_smoothing": {"smoothing": RATE},
    "training.loop_rates": {"d_model": COUNT, "warmup": COUNT, "steps": COUNTS, "experiment": TEXT, "job": TEXT},
    "training.lr_peak": {"d_model": COUNT, "warmup": COUNT, "measure": {"enum": ["value", "step"]}, "experiment": TEXT},
    "training.recipe_peak": {"recipe": TEXT, "measure": {"enum": ["value", "step"]}},
}

#: Params a checker cannot do without.
REQUIRED: dict[str, list[str]] = {
    "observed.architecture": ["part"],
    "observed.search": ["setting"],
    "observed.setting": ["key"],
    "observed.test_set": ["dataset", "split"],
    "training.recipe_peak": ["recipe"],
    "bleu.target_language": ["experiments"],
    "recipe.value": ["key"],
    "relation.expression": ["expression"],
    "run.evaluation_average": ["experiment"],
    "run.job_dimensions": ["experiment"],
    "run.job_dropout": ["experiment"],
    "run.job_positions": ["experiment"],
    "run.job_steps": ["experiment"],
    "table1.complexity": ["layer", "grid"],
    "table1.path": ["layer"],
    "table1.sequential": ["layer", "n"],
    "table2.cost": ["gpus", "gpu"],
    "table2.cost_from_run": ["step_time_claim", "steps"],
    "table3.implied_vocabulary": ["paper_counts"],
    "table3.params": ["row", "vocab_size"],
    "table3.params_difference": ["row", "minus"],
    "scaled.table3_jobs": ["seeds", "sizes", "paper_base", "paper_rows"],
}


#: Params that come only together: a measurement of a model names the split it reads.
TOGETHER: dict[str, dict[str, list[str]]] = {
    "metric.result": {"measure": ["split"], "split": ["measure"]},
}


def params_schema(checker: str) -> dict[str, Any]:
    """The schema of ``params`` for claims measured by ``checker`` (any object for a checker this
    table does not know yet: the loader refuses unknown checkers itself)."""
    if checker not in PARAMS:
        return {"type": "object"}
    schema = {"type": "object", "additionalProperties": False, "properties": PARAMS[checker],
              "required": REQUIRED.get(checker, [])}
    if checker in TOGETHER:
        schema["dependentRequired"] = TOGETHER[checker]
    return schema
