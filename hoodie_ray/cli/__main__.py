"""``python -m hoodie_ray.cli``: the ``hoodie-ray`` command line."""

from __future__ import annotations

import sys

from hoodie_ray.cli import main

sys.exit(main())
