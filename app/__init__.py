"""conductor pty: tell which tmux panes running AI coding agents are READY, BUSY or waiting."""

# Nothing is imported here: `conductor pty status --short` runs in tmux's status line every few
# seconds, and every module loaded on that path costs start-up time.
__version__ = "0.1.0"
