"""``python -m trio_session`` runs the ``trio-session`` command."""

import sys

from .cli import main

sys.exit(main())
