#!/usr/bin/env python3
"""./dev chaos's entry point, as `python3 chaos/chaos.py [flags]`: runs the chaos
package (chaos/__init__.py says what a run does and checks; --help lists the flags)."""
import os
import sys

# Run as a script, this file's folder is first on the path; the repository's root
# goes there instead, so `chaos` is the package and nothing here shadows a module.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from chaos.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
