"""`collcheck stats RUN`: where communication time goes, per call site (sites.py) and per training
step (steps.py), who makes the others wait (skew.py), what to change (hints.py); a table or JSON
(render.py)."""
