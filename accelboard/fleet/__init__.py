"""Hosts, accelerators and their telemetry (raw samples partitioned by time, and rollups)."""
