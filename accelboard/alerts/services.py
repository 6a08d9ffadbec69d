"""services of the alerts app (none yet)."""
