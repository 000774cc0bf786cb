"""A user's statistics helpers."""
from .summary import summarize

__all__ = ["summarize"]
