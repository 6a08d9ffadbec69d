"""admin of the notifications app (none yet)."""
