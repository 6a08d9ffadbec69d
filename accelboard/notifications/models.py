"""models of the notifications app (none yet)."""
