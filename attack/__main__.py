"""`python3 -m attack` (from the repository's root): the same run as attack/attack.py."""
import sys

from .cli import main

sys.exit(main())
