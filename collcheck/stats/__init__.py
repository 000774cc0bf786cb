"""`collcheck stats RUN`: where communication time goes, per call site (sites.py) and per training
step (steps.py), who makes the others wait (skew.py, over the slots every member completed:
slots.py), how many groups communicate at once on each host and at what cost (concurrency.py),
what to change (hints.py, groups.py); all computed once (summary.py) from the model's columns,
the ranks whose columns are equal counted once with their number as weight (sample.py), and shown
as a table or JSON (report/stats.py), in the TUI and in the Perfetto export."""
