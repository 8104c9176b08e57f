#!/usr/bin/env python3
"""./dev attack's entry point, as `python3 attack/attack.py [flags]`: runs the attack
package (attack/__init__.py says what each phase does and bounds; --help lists the flags)."""
import os
import sys

# Run as a script, this file's folder is first on the path; the repository's root
# goes there instead, so `attack` is the package and nothing here shadows a module.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from attack.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
