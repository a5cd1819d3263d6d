"""Work the daemon does for a pane later: queued messages and the post-report cycle.

``jobs`` is the vocabulary and what commands (CLI, MCP) call; ``assessor`` decides stop or
continue after a report; ``step`` is what the watcher runs after each tick.
"""
