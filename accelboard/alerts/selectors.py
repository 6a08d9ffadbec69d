"""selectors of the alerts app (none yet)."""
