"""selectors of the costs app (none yet)."""
