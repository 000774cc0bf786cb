"""`collcheck replay`: re-issue a recorded run's collectives on local gloo processes (docs/replay.md)."""
