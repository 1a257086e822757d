"""English constituency parsing as sequence transduction (Section 6.3, Table 4).

- ``trees``       reading PTB trees with nltk and the standard pre-processing
- ``linearize``   tree <-> token sequence (Vinyals & Kaiser et al., 2014)
- ``repair``      any decoder output -> a tree over the source words
- ``prepare``     parallel source/target files: WSJ 02-21/22/23 or the local PTB sample
- ``scoring``     repaired outputs scored by EVALB

The parser's recipes (``parser-wsj``, ``parser-semi``, ``local-parsing``) are in :mod:`repro.recipes`.
"""
