"""``python -m engine serve …``: see ``engine.server.serve``."""

import sys

from engine.server.serve import main

if __name__ == "__main__":
    sys.exit(main())
