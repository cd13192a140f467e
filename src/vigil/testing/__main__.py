"""``python -m vigil.testing``: serve the fake model by hand (``--help`` for the options)."""

from __future__ import annotations

import sys

from vigil.testing.fake_model import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m vigil.testing"))
