"""Section 4, Table 1, measured: the four layer types (``layer_types``), their FLOP counts and fitted
exponents (``flops``), the depth of their dependency chains (``sequential``) and the path
lengths between positions found by autograd (``path``)."""
