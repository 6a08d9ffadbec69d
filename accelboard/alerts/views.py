"""views of the alerts app (none yet)."""
