"""Run a blis-cosim sweep spec on a Ray cluster.

The binary expands the spec (``blis-cosim sweep --list-points``), runs each chunk of points
(``blis-cosim sweep --only-points``) inside a Ray task, and writes the final report
(``blis-cosim sweep --report``), so results.csv is byte-identical to a local sweep's.
"""

from .driver import main, run_sweep

__all__ = ["main", "run_sweep"]
