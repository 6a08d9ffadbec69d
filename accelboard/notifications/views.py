"""Views of the notifications app (none yet)."""
