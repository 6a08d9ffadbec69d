"""services of the serving app (none yet)."""
