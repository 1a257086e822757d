"""The local reproductions built from the parts (``repro reproduce``):

- ``local``    ``--pipeline local``: checks, training, averaging, decoding, scoring, the report
- ``parsing``  ``--pipeline local-parsing``: Section 6.3's parser on the Penn Treebank sample
"""
