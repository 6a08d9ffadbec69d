"""selectors of the serving app (none yet)."""
