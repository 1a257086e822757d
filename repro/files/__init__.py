"""Files in and out: every file repro reads passes :mod:`repro.files.reader`, every file it writes
:mod:`repro.files.writer` (docs/exit-codes.md states their rules). No other module opens, loads,
writes, replaces or deletes a file (``tests/test_file_access.py`` keeps it so)."""
