"""The paper's experiments as SLURM jobs (submitit), and the local test cluster's client side.

- ``profiles``     cluster profiles (``slurm/*.toml``), validated field by field
- ``experiments``  the jobs each experiment of Tables 2-4 consists of
- ``update``       the update-size invariant of Section 5.1 (gradient accumulation)
- ``job``          the checkpointable, requeueable, distributed training job
- ``smoke``        a tiny synthetic training run (the ``smoke`` experiment, tests)
- ``executor``     submitit executors and submission
- ``status``       the ledger of submissions and their jobs' states
"""
