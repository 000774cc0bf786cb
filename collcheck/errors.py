"""Exit codes and the usage error, shared by every command (cli, replay, tui, demo).

They live below the command line so that a layer which validates user input (a replay
what-if, a scenario name) can say "bad input" without importing the CLI above it.
"""

OK, FINDINGS, INPUT_ERROR, INTERNAL_ERROR, INCOMPLETE = 0, 1, 2, 3, 4


class UsageError(Exception):
    """A command-line value that cannot be used; the message is one line for users (exit 2)."""
