"""``python -m trio_session`` runs the ``trio-session`` command."""

import sys

from ._cli import main

sys.exit(main())
