"""Cost, energy and carbon formulas: pure functions on plain data (no Django).

One module per sub-domain, imported by name (nothing is re-exported here): ``types`` (rates,
money and their errors), ``money`` (the rounding rule, currency conversion), ``benchmark``
(per-unit cost of a benchmark run), ``training`` (to train, per iteration and sample), ``daily``
(one host's accelerators of one type over one day). Each is the one implementation of its
figure: the services that store costs call them.

Units: time in seconds (hours where named ``_h``), power W, energy J (kWh where named ``_kwh``),
carbon gCO2e; money a ``Decimal`` (``Money``: an amount with an ISO currency code and the
``PriceRef`` of the rows it came from, see ``types``). Nothing here guesses a price, a PUE or an
exchange rate: they are arguments; a figure without its price is None and flagged, and a missing
exchange rate raises ``MissingRateError``. The ``pure`` import-linter contract keeps Django out of
this package.
"""
