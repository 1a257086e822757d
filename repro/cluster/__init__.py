"""The paper's experiments as SLURM jobs (submitit), and the local test cluster's client side.

- ``profiles``        cluster profiles (``slurm/*.toml``), validated field by field
- ``experiments``     the jobs each experiment of Tables 2-4 consists of (a recipe each)
- ``job``             the checkpointable, requeueable, distributed job around repro.train's loop
- ``job_evaluation``  after training: the claims a job serves, measured on its model
- ``executor``        submitit executors and submission
- ``ledger``          the ledger of submissions and their jobs' states
"""
