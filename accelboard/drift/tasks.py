"""tasks of the drift app (none yet)."""
