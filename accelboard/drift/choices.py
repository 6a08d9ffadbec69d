"""choices of the drift app (none yet)."""
