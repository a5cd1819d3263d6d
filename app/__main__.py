from __future__ import annotations

import sys

from app.entry import main

sys.exit(main())
