"""selectors of the drift app (none yet)."""
