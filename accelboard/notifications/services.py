"""services of the notifications app (none yet)."""
