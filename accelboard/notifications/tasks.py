"""tasks of the notifications app (none yet)."""
