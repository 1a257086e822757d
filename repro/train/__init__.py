"""Section 5: training. One module per concept.

- ``config``      TrainConfig: everything a training run is described by
- ``update_plan`` how many passes make one update of ~25000 tokens per side (5.1)
- ``schedule``    Eq. 3, the learning rate schedule (5.3)
- ``optimizer``   Adam with beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9 (5.3)
- ``loss``        label-smoothed cross-entropy, fused with the output projection (5.4)
- ``update_step`` one update: accumulated gradients over the devices, then Adam
- ``cadence``     when a checkpoint is written (6.1: every 10 minutes)
- ``checkpoint``  atomic checkpoints, read with weights_only=True
- ``average``     checkpoint averaging (6.1)
- ``data``        the BPE-encoded training corpus (5.1)
- ``metrics_log`` the CSV metrics log
- ``loop``        the training loop: set-up, exact resume, checkpoints

Nothing outside this package steps an optimizer or writes a checkpoint.
"""

from repro.train.config import TrainConfig

__all__ = ["TrainConfig"]
