"""accelboard-upload: send benchmark result files to an accelboard server from a CI job."""

__version__ = "0.1.0"
