"""Alerts: regressions, drift and production signals, their triage, and the emails about them."""
