"""`python -m collcheck ...` is the `collcheck` command."""

import sys

from .cli import main

sys.exit(main())
