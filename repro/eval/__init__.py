"""Evaluation metrics: BLEU for translation (Sections 6.1-6.2) and EVALB bracket F1 for parsing (Section 6.3)."""
