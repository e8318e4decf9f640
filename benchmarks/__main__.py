"""``python -m benchmarks --records 1000000``: see ``benchmarks.harness``."""

import sys

from benchmarks.harness import main

sys.exit(main())
