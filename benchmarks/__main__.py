"""``python -m benchmarks``: the same as ``python benchmarks/run.py`` (see that file)."""

import sys
from pathlib import Path

# The benchmarks import each other as plain scripts.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import main

sys.exit(main())
