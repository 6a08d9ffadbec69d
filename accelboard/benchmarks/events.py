"""What the benchmarks app announces to the apps above it (see ``accelboard.core.events``).

``run_recorded``: a new run and its metrics are committed (a re-sent run, already stored, is not
announced again). ``metric_names`` are the run's metric names, so a subscriber can skip runs
without what it reads (the drift check wants accuracy results).
"""

from __future__ import annotations

from accelboard.core.events import Event

run_recorded = Event("run_recorded", fields=("run_id", "team_id", "variant_id", "metric_names"))
