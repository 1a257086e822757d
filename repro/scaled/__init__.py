"""Table 3 at a named scale, read back: each row over its seeds, and Section 6.2's conclusions on them.

- :mod:`repro.scaled.rows`     the rows of a scale from the stored per-seed records, with their intervals;
- :mod:`repro.scaled.verdicts` each conclusion of Section 6.2 as ``holds``, ``reversed`` or ``inconclusive``.

The runs themselves are jobs of ``repro submit table3 --scale NAME`` (:mod:`repro.cluster.experiments`),
or ``repro reproduce --pipeline table3-small`` (:mod:`repro.pipeline.table3_small`); the scales are recipes
(:class:`repro.recipes.Scale`).
"""
