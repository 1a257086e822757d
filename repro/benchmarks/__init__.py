"""Side-by-side speed measurements, each printing one JSON object:

- ``python -m repro.benchmarks.train_speed``: training tokens/s of repro's Transformer against
  ``torch.nn.Transformer`` at the base configuration (tied 37000-word projection, Adam,
  4096 source + 4096 target tokens), measured in one process, alternating.
- ``python -m repro.benchmarks.decode_speed``: beam search and greedy decoding with the key/value
  cache against full recompute, on 64-token outputs.
- ``python -m repro.benchmarks.job_path`` (``repro bench jobpath``): the training job's own path on
  real text against the fixed-shape update at the same tokens per update.
"""
