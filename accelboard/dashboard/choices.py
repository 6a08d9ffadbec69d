"""choices of the dashboard app (none yet)."""
