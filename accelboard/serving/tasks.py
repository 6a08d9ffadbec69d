"""tasks of the serving app (none yet)."""
