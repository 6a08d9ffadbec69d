"""admin of the drift app (none yet)."""
