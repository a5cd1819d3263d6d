"""Developer tools, run from the checkout as modules (``.venv/bin/python -m scripts.bench``): a
package, so they and the tests import ``app``, ``tests`` and each other with no path set-up.
install.sh, conductor and tmux-status-right.sh beside them are what users run."""
