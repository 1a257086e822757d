"""The measurements a metric claim may name (``params.measure``), and the splits they read.

A metric claim says how its number is measured, not only what the number is: ``measure`` names one
entry of this catalogue and ``split`` the part of the run's data set it is measured on. The jobs
that train the models (the local main job, the local parser job, the cluster jobs) measure each of
their claims by that name, through one registry of implementations (:mod:`repro.measures`), so a
claim id never decides what is measured. A name not listed here is refused when the claims are
loaded (:mod:`repro.claims.params`), naming the file, the claim and the field.
"""

from __future__ import annotations

#: name -> what the measurement is (the registry, :mod:`repro.measures`, implements each).
MEASURES: dict[str, str] = {
    "bleu.tokenized-compound-split": (
        "BLEU of the recipe's beam search, the paper's protocol (Section 6.1, Table 2 and 3): Moses-tokenized "
        "multi-bleu with compound splitting (tensor2tensor get_ende_bleu.sh); sacreBLEU kept beside"),
    "bleu.sacrebleu": (
        "sacreBLEU of the recipe's beam search on detokenized output, with sacreBLEU's bootstrap interval; the "
        "paper's protocol kept beside"),
    "perplexity.wordpiece": (
        "perplexity per target wordpiece (Table 3's PPL): exp of the mean NLL, no label smoothing, EOS counted"),
    "f1.evalb": (
        "bracketing F1 of the recipe's search, outputs repaired into trees over the source words, scored by "
        "EVALB with COLLINS.prm (Table 4)"),
    "step-time.steady-state": (
        "steady-state wall seconds per update of this run of the job (Section 5.2): the median over its updates "
        "after warm-up, start-up, compilation, evaluation and checkpoint writes left out and stored beside it "
        "by name, with its device count and each device's measured peak, to be normalised to 8 P100"),
    "step-time.run-mean": (
        "wall seconds of this run of the job over the updates it made, start-up and compilation included (an "
        "upper bound of Section 5.2's step; the claims use step-time.steady-state), with its device count and "
        "each device's measured peak"),
    "step-time.logged-median": (
        "median wall seconds per step over the training log's intervals, with their spread"),
}

#: The measurements that read no split of the data set: they time the run itself.
RUN_MEASURES = ("step-time.steady-state", "step-time.run-mean", "step-time.logged-median")
#: The measurements of a trained model on a split of its data set.
MODEL_MEASURES = tuple(name for name in MEASURES if name not in RUN_MEASURES)
#: The splits a measurement may read (:meth:`repro.data.corpora.Dataset.split`).
SPLITS = ("train", "dev", "test")
