"""What every layer may use: the settings (every COLLCHECK_* variable), the errors and exit codes,
and the one function that makes a string from a log or dump safe to show. Standard library only:
the training job imports it."""

__version__ = "0.1.0"
