"""Section 5: training. One module per concept.

- ``config``      TrainConfig and the named profiles (paper, paper-big, local)
- ``schedule``    Eq. 3, the learning rate schedule (5.3)
- ``optimizer``   Adam with beta_1 = 0.9, beta_2 = 0.98, epsilon = 1e-9 (5.3)
- ``loss``        label-smoothed cross-entropy, fused with the output projection (5.4)
- ``checkpoint``  atomic checkpoints, read with weights_only=True
- ``average``     checkpoint averaging (6.1)
- ``data``        the BPE-encoded training corpus (5.1)
- ``metrics``     the CSV metrics log
- ``loop``        the training loop: accumulation, DDP, exact resume
"""

from repro.train.config import PROFILES, TrainConfig, get_profile

__all__ = ["PROFILES", "TrainConfig", "get_profile"]
