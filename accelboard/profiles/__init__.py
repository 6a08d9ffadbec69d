"""GPU profiles attached to benchmark runs: where the GPU time goes, and what each part costs.

The pure parts (``categories``, ``analysis``, ``comparison``) need no Django and are used by
``accelboard parse``; the Django app (models, services, selectors, views) stores a profile's
aggregates per run, rank, step, category and kernel and draws the Profile tab and the comparison.
"""
