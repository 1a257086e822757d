"""Sections 5.1-5.4 observed on a run's own records: its logged rates, its updates' tokens, their number,
its optimizer and its model as its checkpoint holds them (``repro check --run DIR``, basis ``run``).

Each checker reads :class:`repro.observed.run_files.RunFiles` (the engine's target) and judges the
run's value with :mod:`repro.observed.judge`: records that contradict each other or the run's recipe
fail, naming the file, the line or field and both values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Contradiction, Measurement, NotRun
from repro.observed.history import changes, parts
from repro.observed.judge import judge, paper_job
from repro.observed.replay import MAX_REPLAYED, replayed_tokens
from repro.checks.observed_records import built_as_recipe, logged_rows, run_steps, sessions, written_at_end
from repro.observed.run_files import missing
from repro.train.config import TrainConfig
from repro.train.schedule import learning_rate
from repro.train.update_plan import plan_update


def _newest(files: Any):
    if files.newest is None:
        raise NotRun(missing("a checkpoint: the model as built and its optimizer", files.path / "checkpoints"))
    return files.newest


def _config(files: Any) -> TrainConfig:
    """The run's training config, as its newest checkpoint holds it (its record's where it has none)."""
    return TrainConfig.from_dict(files.train, source=f"{files.path}: the run's recipe")


def part_configs(files: Any) -> list[tuple[int, TrainConfig]]:
    """The training config of each part of the run, from the update it begins at
    (:func:`repro.observed.history.parts`); the run's recipe where its records say no other."""
    found = [(p.first, TrainConfig.from_dict(p.train, source=p.where)) for p in parts(files)]
    return found or [(1, _config(files))]


def config_at(configs: list[tuple[int, TrainConfig]], step: int) -> TrainConfig:
    """The training config update ``step`` ran with, of :func:`part_configs`."""
    return next(cfg for first, cfg in reversed(configs) if first <= step)


def _changed(claim: Claim, value: Any, detail: str, changed: list[str], unit: str | None = None) -> Measurement:
    """A run resumed with another value of what ``claim`` reads departs, whatever its last session ran."""
    return Measurement(value, passed=False, departs=True, unit=unit, detail=f"{detail}; {'; '.join(changed)}")


@checker("observed.eq3", audits=False, evidence="run")
def eq3(claim: Claim, ctx: CheckContext) -> Measurement:
    """Every logged rate against Eq. 3 with the run's d_model (the model as built) and warm-up, and its
    lr_scale; each kept checkpoint's Adam rate against Eq. 3 at its step, with the recipe of its part of the run."""
    files = ctx.target
    paper_job(claim, files)
    rows, newest, cfg = logged_rows(files), _newest(files), _config(files)
    d_model = int(newest.model_config["d_model"])
    worst, where, configs = 0.0, "", part_configs(files)
    for row in rows:
        ran = config_at(configs, row.step)
        wanted = learning_rate(row.step, d_model, ran.warmup_steps, ran.lr_scale)
        error = abs(row.lr - wanted) / wanted
        if error > worst:
            worst, where = error, (f"{files.metrics_path} line {row.line} (step {row.step}): lr {row.lr!r}, where Eq. 3 "
                                   f"with the run's d_model {d_model} and warmup_steps {ran.warmup_steps}, times its "
                                   f"lr_scale {ran.lr_scale}, gives {wanted!r}")
    if worst > claim.tolerance.get("abs", 0.0):
        raise Contradiction(f"{where} (relative error {worst:.3g})", worst)
    for ckpt in files.kept:   # each kept checkpoint's Adam holds the rate of the part of the run that wrote it
        groups = ckpt.optimizer
        if groups and "lr" in groups[0] and ckpt.step >= 1:
            ran = config_at(configs, ckpt.step)
            wanted = learning_rate(ckpt.step, d_model, ran.warmup_steps, ran.lr_scale)
            rate = float(groups[0]["lr"])
            if not abs(rate - wanted) <= 1e-6 * wanted:   # NaN fails too
                raise Contradiction(f"{ckpt.path}: Adam's rate {groups[0]['lr']!r} after update {ckpt.step}, where Eq. 3 "
                                    f"with warmup_steps {ran.warmup_steps} and lr_scale {ran.lr_scale} gives {wanted!r}",
                                    rate)
    value = abs(cfg.lr_scale - 1.0)   # relative error of the run's rates against the paper's Eq. 3 (no scale)
    detail = (f"the {len(rows)} logged rates (updates {rows[0].step}-{rows[-1].step}) are Eq. 3 with d_model "
              f"{d_model} and warmup_steps {cfg.warmup_steps} times {cfg.lr_scale} to within {worst:.1e}")
    changed = changes(files, ("warmup_steps", "lr_scale"))
    if changed:   # each part's rates are Eq. 3 with its own recipe; one schedule they are not
        return _changed(claim, value, detail.replace(" are Eq. 3", " are, part by part, Eq. 3"), changed)
    return judge(claim, value, detail, [f"lr_scale {cfg.lr_scale} (the paper: Eq. 3 unscaled)"]
                 if cfg.lr_scale != 1.0 else [])


@checker("observed.warmup", audits=False, evidence="run")
def warmup(claim: Claim, ctx: CheckContext) -> Measurement:
    """The warm-up recovered from the logged rates inside it (Eq. 3: lr = c d^-0.5 step w^-1.5 there),
    which must be the run's recipe's; the recipe's when no logged update lies inside the warm-up."""
    files = ctx.target
    paper_job(claim, files)
    rows, cfg = logged_rows(files), _config(files)
    d_model = int(_newest(files).model_config["d_model"])
    inside, configs = [], part_configs(files)   # (row, the warm-up its rate gives, the recipe it ran)
    for r in rows:
        ran = config_at(configs, r.step)
        # a row of an update before the recipe's warm-up ends, or whose rate lies below the decay, warms up
        if r.lr > 0 and (r.step < ran.warmup_steps or r.lr < ran.lr_scale * d_model ** -0.5 * r.step ** -0.5 * (1 - 1e-9)):
            inside.append((r, round((ran.lr_scale * d_model ** -0.5 * r.step / r.lr) ** (2 / 3)), ran))
    for row, found, ran in inside:
        if found != ran.warmup_steps:
            raise Contradiction(f"{files.metrics_path} line {row.line} (step {row.step}): lr {row.lr!r} warms up over "
                                f"{found} updates, but the run's recipe says warmup_steps {ran.warmup_steps}", found)
    if inside:
        row, found, _ = inside[-1]
        how = f"recovered from the rates of {len(inside)} logged update(s) inside the warm-up (the last: {row.step})"
    else:   # past the warm-up Eq. 3 does not depend on it: the rates show no warm-up, only the recipe says one
        found = cfg.warmup_steps
        how = f"the run's recipe (no logged update lies inside the warm-up; the first logged is {rows[0].step})"
        if found == claim.expected and not changes(files, ("warmup_steps",)):
            raise NotRun(f"needs another run: {files.metrics_path} logs no update inside the warm-up (the first logged is "
                         f"update {rows[0].step}, past the recipe's warmup_steps {found}), and past it Eq. 3 does not "
                         "depend on warmup_steps: the warm-up the run made cannot be read off its rates")
    detail = f"warm-up of {found} updates, {how}"
    changed = changes(files, ("warmup_steps",))
    if changed:
        return _changed(claim, found, detail, changed)
    return judge(claim, found, detail, [f"warmup_steps {cfg.warmup_steps}"] if cfg.warmup_steps != claim.expected else [])


@checker("observed.adam", audits=False, evidence="run")
def adam(claim: Claim, ctx: CheckContext) -> Measurement:
    """Adam's betas and epsilon as the newest checkpoint's optimizer holds them; every kept checkpoint's
    Adam must be plain Adam with the betas and epsilon of the part of the run that wrote it."""
    files = ctx.target
    paper_job(claim, files)
    newest, cfg = _newest(files), _config(files)
    if not newest.optimizer or "betas" not in newest.optimizer[0]:
        raise NotRun(f"needs another run: {newest.path} holds no optimizer state (an averaged or foreign checkpoint)")
    changed = changes(files, ("adam_beta1", "adam_beta2", "adam_eps"))
    configs = part_configs(files)
    for ckpt in files.kept:   # each kept checkpoint's Adam, against the recipe of the part of the run that wrote it
        ran = cfg if ckpt is newest else config_at(configs, ckpt.step)
        _paper_adam(ckpt, [ran.adam_beta1, ran.adam_beta2, ran.adam_eps], changed)
    group = newest.optimizer[0]
    value = [float(group["betas"][0]), float(group["betas"][1]), float(group["eps"])]
    asked = [cfg.adam_beta1, cfg.adam_beta2, cfg.adam_eps]
    detail = f"betas ({value[0]}, {value[1]}), epsilon {value[2]:g} in {newest.path.name}"
    if changed:
        return _changed(claim, value, detail, changed)
    return judge(claim, value, detail, [f"adam betas/epsilon {asked}"] if not claim.within(asked) else [])


#: What Section 5.3's Adam (Kingma and Ba) is beyond its betas and epsilon: torch.optim.Adam's other options at
#: their defaults (no weight decay, coupled or decoupled, no AMSGrad, minimising), none of which a recipe sets.
PLAIN_ADAM = {"weight_decay": 0, "amsgrad": False, "maximize": False, "decoupled_weight_decay": False}


def _paper_adam(ckpt: Any, asked: list[float], changed: list[str]) -> None:
    """A checkpoint's Adam must hold the betas and epsilon its recipe asked (a resume restores Adam's state,
    its betas included, whatever the recipe says now) and be plain Adam (:data:`PLAIN_ADAM`) that made the
    checkpoint's updates: its state counts as many as the checkpoint holds (a loop that meets a non-finite
    loss stops without a step, so a faithful run's Adam skips none)."""
    if not ckpt.optimizer or "betas" not in ckpt.optimizer[0]:
        return
    if ckpt.adam_steps and ckpt.adam_steps != (float(ckpt.step),):   # NaN differs too
        raise Contradiction(f"{ckpt.path}: field 'optimizer.state' counts {', '.join(f'{s:g}' for s in ckpt.adam_steps)} "
                            f"Adam update(s), but the checkpoint is of update {ckpt.step}: Adam's moments and bias "
                            "correction are not the run's (an optimizer rebuilt at a resume, or another run's)",
                            list(ckpt.adam_steps))
    for i, group in enumerate(ckpt.optimizer):
        value = [float(group["betas"][0]), float(group["betas"][1]), float(group["eps"])]
        if value != asked:
            raise Contradiction(f"{ckpt.path}: Adam's betas and epsilon {value} are not the run's recipe's {asked}"
                                + (f" ({'; '.join(changed)}, but Adam kept the betas of the checkpoint it resumed "
                                   "from)" if changed else ""), value)
        other = {k: group[k] for k, plain in PLAIN_ADAM.items() if k in group and group[k] != plain}
        if other:
            raise Contradiction(f"{ckpt.path}: field 'optimizer.param_groups[{i}]' holds "
                                f"{', '.join(f'{k} {v!r}' for k, v in other.items())}: not the paper's Adam "
                                f"(Section 5.3; no recipe of the run asks for it)", value)


def _world_size(files: Any) -> int:
    plan = (files.record or {}).get("update_plan") or {}
    sessions = (files.record or {}).get("sessions") or [{}]
    return int(plan.get("world_size") or sessions[-1].get("devices") or 1)


def _planned_as_recipe(files: Any, cfg: TrainConfig) -> None:
    """The update plan ``run.json`` records (devices x accumulated passes x tokens per pass) must be the one the
    recipe of its last session gives on its devices (:func:`repro.train.update_plan.plan_update`)."""
    plan, recorded = (files.record or {}).get("update_plan"), (files.record or {}).get("sessions") or [{}]
    if not isinstance(plan, dict):
        return
    if isinstance(recorded[-1].get("train"), dict):   # an interrupted run's newest checkpoint is of a later session
        cfg = TrainConfig.from_dict(recorded[-1]["train"], source=f"{files.record_path}: field 'sessions[-1].train'")
    wanted = plan_update(cfg.tokens_per_batch, _world_size(files), cfg.max_tokens_per_device).to_dict()
    key = next((k for k in wanted if k in plan and plan[k] != wanted[k]), None)
    if key is not None:
        raise Contradiction(f"{files.record_path}: field 'update_plan.{key}' is {plan[key]!r}, but the run's recipe "
                            f"(tokens_per_batch {cfg.tokens_per_batch}, max_tokens_per_device {cfg.max_tokens_per_device}) "
                            f"on {wanted['world_size']} device(s) plans {wanted[key]!r}", plan[key])


@checker("observed.tokens", audits=False, evidence="run")
def tokens(claim: Claim, ctx: CheckContext) -> Measurement:
    """The real tokens per side of every update, recounted from the run's encoded corpus with its own
    batchers (:mod:`repro.observed.replay`), against the counts of every logged update; their median."""
    files = ctx.target
    paper_job(claim, files)
    rows, cfg = logged_rows(files), _config(files)
    for row in rows:
        for side in ("src_tokens", "tgt_tokens"):
            finite(getattr(row, side), f"{files.metrics_path} line {row.line} (step {row.step}): {side}")
    _planned_as_recipe(files, cfg)
    steps = rows[-1].step   # the run's last update (logged_rows), or an interrupted run's newest checkpoint's at most
    examples, why = files.encoded_pairs
    if examples is not None:
        replayed = min(steps, MAX_REPLAYED)
        counts = replayed_tokens(cfg, examples, _world_size(files), replayed)
        for row in rows:
            if row.step <= replayed and (row.src_tokens, row.tgt_tokens) != tuple(counts[row.step - 1]):
                index = 0 if row.src_tokens != counts[row.step - 1][0] else 1
                side, logged = ("src_tokens", row.src_tokens) if index == 0 else ("tgt_tokens", row.tgt_tokens)
                raise Contradiction(f"{files.metrics_path} line {row.line} (step {row.step}): {side} {logged}, but the "
                                    f"run's batchers gave update {row.step} {int(counts[row.step - 1][index])} "
                                    f"{('source', 'target')[index]} tokens (recounted from {files.path / 'encoded'})",
                                    logged)
        how = (f"the run's {replayed} updates recounted from its encoded corpus" if replayed == steps else
               f"the first {replayed} of its {steps} updates recounted from its encoded corpus")
        checked = sum(r.step <= replayed for r in rows)
        how += f"; the {checked} logged updates' counts agree with them"
        counted = np.arange(1, replayed + 1)
    else:
        counts = np.asarray([(r.src_tokens, r.tgt_tokens) for r in rows], dtype=np.int64)
        how = f"the {len(rows)} logged updates only ({why}: nothing to recount them from)"
        counted = np.asarray([r.step for r in rows])
    median = [int(np.median(counts[:, 0])), int(np.median(counts[:, 1]))]
    spread = f"range {counts[:, 0].min()}-{counts[:, 0].max()} source, {counts[:, 1].min()}-{counts[:, 1].max()} target"
    asked = [cfg.tokens_per_batch, cfg.tokens_per_batch]
    departures = [f"tokens_per_batch {cfg.tokens_per_batch}"] if not claim.within(asked) else []
    detail = f"a median of {median[0]} source and {median[1]} target tokens per update ({spread}; {how})"
    drifted = _drifted_session(claim, files, counts, counted) if claim.within(median) else None
    if drifted is not None:   # the run's median is the paper's batch, the updates of one of its sessions are not
        return Measurement(drifted[0], passed=False, detail=f"{detail}; but {drifted[1]}, where every session of "
                           f"the run asked tokens_per_batch {cfg.tokens_per_batch} (a resume keeps the batch)")
    return judge(claim, median, detail, departures)


def _drifted_session(claim: Claim, files: Any, counts: np.ndarray, counted: np.ndarray) -> tuple[list[int], str] | None:
    """The median tokens of the first session of the run whose counted updates hold other than the claim's
    batch, and which session that is, in words (None: every session's updates hold it)."""
    for i, session in enumerate((files.record or {}).get("sessions") or []):
        mine = counts[(counted > session["resumed_from"]) & (counted <= session["ended_at"])]
        if len(mine):
            median = [int(np.median(mine[:, 0])), int(np.median(mine[:, 1]))]
            if not claim.within(median):
                return median, (f"the {len(mine)} counted updates of its session {i} (updates {session['resumed_from'] + 1}-"
                                f"{session['ended_at']}, {files.record_path.name}) hold a median of {median[0]} source "
                                f"and {median[1]} target tokens")
    return None


@checker("observed.updates", audits=False, evidence="run")
def updates(claim: Claim, ctx: CheckContext) -> Measurement:
    """The updates the run made: its record's, its newest checkpoint's and its log's last step agree."""
    files = ctx.target
    paper_job(claim, files)
    newest, cfg = _newest(files), _config(files)
    steps = run_steps(files)
    if files.record is not None and files.record.get("steps") != steps and files.interrupted is None:
        raise Contradiction(f"{files.record_path}: field 'steps' is {files.record.get('steps')!r}, but the run's newest "
                            f"checkpoint {newest.path.name} is of update {steps}", files.record.get("steps"))
    asked = (files.record or {}).get("max_steps")
    if asked is not None and asked != cfg.max_steps and files.interrupted is None:
        raise Contradiction(f"{files.record_path}: field 'max_steps' is {asked!r}, but the recipe its last session ran "
                            f"({newest.path.name}) asks max_steps {cfg.max_steps}", asked)
    if newest.path.name != f"step_{steps:08d}.pt":
        raise Contradiction(f"{newest.path}: holds update {steps}, named for another", steps)
    sessions(files)
    if files.metrics:
        logged_rows(files)   # the log's rows are the run's updates, in order, to its last
    if files.interrupted is not None:   # how many updates the run makes, its end says
        raise written_at_end(files, f"the updates the run makes are known when its last session ends ({files.record_path})")
    departures = []
    if cfg.max_steps != claim.expected:
        departures.append(f"max_steps {cfg.max_steps}")
    if steps < cfg.max_steps:
        departures.append(f"it stopped at update {steps} of its {cfg.max_steps} (resume it to finish)")
    return judge(claim, steps, f"ran {steps} of {claim.expected} updates", departures, unit="updates")


@checker("observed.setting", audits=False, evidence="run")
def setting(claim: Claim, ctx: CheckContext) -> Measurement:
    """A setting the paper states, as the run's checkpoint holds it (``key``: ``dropout``, of the model as
    built; ``label_smoothing``, of its training config), which the run's record must agree with."""
    files = ctx.target
    paper_job(claim, files)
    newest, key = _newest(files), claim.params["key"]
    if key == "dropout":
        value = built_as_recipe(files).get("dropout")
        where = f"the model config of {newest.path.name}"
    else:
        value = newest.train_config.get(key, files.train.get(key))
        where = f"the training config of {newest.path.name}"
    if value is None:
        raise NotRun(f"needs another run: {newest.path} does not record '{key}'")
    size = newest.model_config.get("src_vocab_size")
    read = (lambda train: TrainConfig.from_dict(train, source=f"{files.path}: a recipe of the run").model_config(size)
            .dropout) if key == "dropout" else (lambda train: train.get(key))
    changed = changes(files, (key,), read)
    if changed:
        return _changed(claim, value, f"{key} = {value} in {where}", changed)
    return judge(claim, value, f"{key} = {value} in {where}", [f"{key} {value}"])


def _layers(shapes: dict[str, tuple[int, ...]], stack: str) -> int:
    return len({name.split(".")[1] for name in shapes if name.startswith(f"{stack}.")})


@checker("observed.dimensions", audits=False, evidence="run")
def dimensions(claim: Claim, ctx: CheckContext) -> Measurement:
    """N, d_model, d_ff, h, d_k and d_v counted on the newest checkpoint's weights (h from its model
    config: the heads share one projection), which its model config must agree with."""
    files = ctx.target
    paper_job(claim, files)
    newest = _newest(files)
    shapes, config = newest.shapes, built_as_recipe(files)
    try:
        h = int(config["n_heads"])
        value = {"N_encoder": _layers(shapes, "encoder_layers"), "N_decoder": _layers(shapes, "decoder_layers"),
                 "d_model": shapes["src_embed.lut.weight"][1], "d_ff": shapes["encoder_layers.0.feed_forward.w_1.weight"][0],
                 "h": h, "d_k": shapes["encoder_layers.0.self_attn.w_q.weight"][0] // h,
                 "d_v": shapes["encoder_layers.0.self_attn.w_v.weight"][0] // h}
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, ZeroDivisionError) as err:
        raise Contradiction(f"{newest.path}: its weights are not those of a model of its config ({err!r})") from None
    said = {"N_encoder": config.get("n_layers"), "N_decoder": config.get("n_layers"), "d_model": config.get("d_model"),
            "d_ff": config.get("d_ff"), "h": h, "d_k": config.get("d_k") or config.get("d_model", 0) // h,
            "d_v": config.get("d_v") or config.get("d_model", 0) // h}
    if value != said:
        wrong = sorted(k for k in value if value[k] != said[k])
        raise Contradiction(f"{newest.path}: its weights have {', '.join(f'{k} {value[k]}' for k in wrong)}, its model "
                            f"config says {', '.join(f'{k} {said[k]}' for k in wrong)}", value)
    counted = _parameters(newest)
    recorded = (files.record or {}).get("parameters")
    if isinstance(recorded, int) and recorded != counted:
        raise Contradiction(f"{files.record_path}: field 'parameters' is {recorded:,}, but the weights of "
                            f"{newest.path.name} hold {counted:,} (tied matrices once)", recorded)
    if isinstance(claim.expected, dict):   # a statement of some of them (Section 6.3's parser: N and d_model)
        value = {k: v for k, v in value.items() if k in claim.expected}
    text = ", ".join(f"{k} {v}" for k, v in value.items())
    return judge(claim, value, f"{text} on the weights of {newest.path.name} ({counted:,} parameters)",
                 [f"its model config ({newest.path.name})"])


def _parameters(newest: Any) -> int:
    """The numbers a checkpoint's weights hold, a tensor stored under several names (tied) counted once."""
    size = {name: int(np.prod(shape)) for name, shape in newest.shapes.items()}
    return sum(size.values()) - sum(size[g[0]] * (len(g) - 1) for g in newest.tied)
