"""End-to-end jobs built from the parts: evaluate a checkpoint, and the local reproduction
(``repro reproduce --profile local``: checks, training, averaging, decoding, scoring)."""
