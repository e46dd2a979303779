"""Tables and figures built from aggregated run tables (see :mod:`pflrepro.results`)."""
