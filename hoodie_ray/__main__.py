"""``python -m hoodie_ray``: the ``hoodie-ray`` command line."""

import sys

from hoodie_ray.cli import main

if __name__ == "__main__":
    sys.exit(main())
