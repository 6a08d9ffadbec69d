"""The dashboard app keeps no tables of its own."""
