"""A run's own records against the paper (``repro check --run DIR``).

:mod:`repro.observed.run_files` reads a run directory strictly (a malformed record is refused naming
its file and field); :mod:`repro.observed.counterpart` names the paper's job a run stands for;
:mod:`repro.observed.gate` decides whether a result counts for a paper claim (the paper job's recipe,
the paper's test set); :mod:`repro.observed.replay` recounts the tokens of every update; the checkers
of the claims of basis ``run`` (``claims/observed.toml``) live in ``repro/checks/observed_*.py``, which
read every record through ``repro/checks/observed_records.py`` (what the records must say of each other).
"""
