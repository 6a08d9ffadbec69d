"""models of the drift app (none yet)."""
