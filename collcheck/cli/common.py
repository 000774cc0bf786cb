"""What several commands share: the argument that names a run."""

from __future__ import annotations

RUN_HELP = ("run directory (or a logs root: the newest run is used), or a directory of PyTorch Flight Recorder "
            "dumps")


def add_run_argument(parser) -> None:
    parser.add_argument("logs", help=RUN_HELP)
