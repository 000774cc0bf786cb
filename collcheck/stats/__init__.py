"""`collcheck stats RUN`: where communication time goes, per call site (sites.py) and per training
step (steps.py), who makes the others wait (skew.py), how many groups communicate at once on each
host and at what cost (concurrency.py), what to change (hints.py, groups.py); all computed once
(summary.py) and shown as a table or JSON (render.py), in the TUI and in the Perfetto export."""
