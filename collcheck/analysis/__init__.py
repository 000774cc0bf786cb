"""Analysis: align the ranks' sequences, classify divergences, analyse hangs."""
