"""conductor pty: tell which tmux panes running AI coding agents are READY, BUSY or waiting."""

from __future__ import annotations

import logging

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"
