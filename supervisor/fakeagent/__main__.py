"""``python -m supervisor.fakeagent``."""

import sys

from . import main

sys.exit(main())
