"""tasks of the alerts app (none yet)."""
