"""Make a bare matplotlib Figure render as a picture in Jupyter (perflab.plots does on import).

The plotting functions build Figures without pyplot (no global state, safe in
tests), and Jupyter's inline backend only registers its PNG formatter when
pyplot is imported, so we register it ourselves. Outside IPython: nothing.
"""

from __future__ import annotations


def enable() -> None:
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import select_figure_formats
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        select_figure_formats(shell, {"png"})
