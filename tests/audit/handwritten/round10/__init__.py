"""Issue 43, tenth round of hand-written unseen families: see EXPECTED.md."""
