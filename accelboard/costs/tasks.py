"""tasks of the costs app (none yet)."""
