"""Cost, energy and carbon formulas: pure functions on plain data, numpy and pandas (no Django).

One module per sub-domain, imported by name (nothing is re-exported here): ``types`` (rates,
money, energy, hours and their errors), ``energy`` (counters, integrated power, kWh, PUE,
carbon), ``hours`` (allocation, usage, idle), ``money`` (capacity and energy cost, conversion,
sums), ``benchmark`` (per-unit cost of a benchmark run), ``training`` (per iteration, sample,
token), ``daily`` (one host's accelerators of one type over one day).

Units: time in seconds (hours where named ``_h``), power W, energy J (kWh where named ``_kwh``),
energy counters mJ, carbon gCO2e; money as ``Money`` (a ``Decimal`` amount with an ISO currency
code, see ``types``). Every result carries what it was computed from: ``inputs`` (the numbers
used) and ``sources`` (the price rows, electricity rows and exchange rates passed in, as
``PriceRef``), so that a report can cite each figure's inputs. Nothing here guesses a price, a
PUE or an exchange rate: they are arguments, and a missing exchange rate raises
``MissingRateError``. The ``pure`` import-linter contract keeps Django out of this package.
"""
