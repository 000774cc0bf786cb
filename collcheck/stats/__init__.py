"""`collcheck stats RUN`: where communication time goes, per call site (sites.py), in a table or
JSON (render.py)."""
