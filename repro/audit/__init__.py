"""Auditing any Transformer implementation against the paper's equation-level claims."""
