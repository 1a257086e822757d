"""repro: a spec-driven reproduction of "Attention Is All You Need" (Vaswani et al., 2017).

The package maps onto the paper:

- ``repro.model``   Section 3, the Transformer itself (one module per concept).
- ``repro.claims``  the engine that loads ``claims/*.toml`` and runs one checker per claim.
- ``repro.checks``  the checkers, grouped by the part of the paper they measure.
- ``repro.results`` the results store: every measured value with its provenance.
- ``repro.commands`` one module per ``repro`` sub-command.
"""

__version__ = "0.1.0"
