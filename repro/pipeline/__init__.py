"""The local reproductions built from the parts (``repro reproduce``):

- ``local``    ``--profile local``: checks, training, averaging, decoding, scoring, the report
- ``parsing``  ``--profile local-parsing``: Section 6.3's parser on the Penn Treebank sample
"""
