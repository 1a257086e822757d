"""Data for Section 5.1: datasets and their download recipes, parallel text, the shared BPE vocabulary, token batches.

- ``corpora``   named datasets (WMT 2014 EN-DE / EN-FR, Multi30k, ...) and folders laid out like ``../shared/data``
- ``downloads``, ``fetch``  the official WMT download recipes with checksums; ``repro data fetch NAME``
- ``corpus``    line-aligned parallel files, with errors that name file and line
- ``vocab``     one BPE vocabulary shared by source and target; PAD=0, BOS=1, EOS=2, UNK=3
- ``batching``  batches of ~N source and ~N target tokens, exact resume, sharding
- ``synthetic`` the copy-reversed corpus of the smoke recipe (no files, no BPE)
"""

from repro.data.batching import Batch, TokenBatcher, collate
from repro.data.corpus import ParallelCorpus, read_parallel
from repro.data.corpora import Dataset, get_dataset, register, resolve_data_dir
from repro.data.vocab import BOS, EOS, PAD, UNK, SharedVocab

__all__ = [
    "BOS", "EOS", "PAD", "UNK", "Batch", "Dataset", "ParallelCorpus", "SharedVocab", "TokenBatcher",
    "collate", "get_dataset", "read_parallel", "register", "resolve_data_dir",
]
