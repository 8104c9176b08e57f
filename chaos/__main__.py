"""`python3 -m chaos` (from the repository's root): the same run as chaos/chaos.py."""
import sys

from .cli import main

sys.exit(main())
