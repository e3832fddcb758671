"""What the lab notebooks show: verdicts, figures and a small control panel.

Notebooks stay short: they call these functions, and the logic stays in the
package where it is tested.
"""

from __future__ import annotations

import html
import os
from typing import TYPE_CHECKING, Callable

import ipywidgets as widgets
from IPython.display import HTML, display

from .errors import PerflabError
from .formatting import inline_html
from .probe import Machine
from .verdict import COLOURS, Verdict

if TYPE_CHECKING:  # the notebooks hand in their lab; the core imports none
    from .labs import Lab


def quick_mode() -> bool:
    """Headless runs (tests, `perflab run all`) set PERFLAB_QUICK=1 to keep notebooks short."""
    return os.environ.get("PERFLAB_QUICK") == "1"


def show_verdict(verdict: Verdict, lab: Lab) -> None:
    """The verdict in colour, its notes, then the lab's figures."""
    colour = COLOURS[verdict.verdict]
    notes = "".join(f"<li>{inline_html(n)}</li>" for n in verdict.notes)
    display(HTML(
        f'<p><span style="background:{colour};color:white;padding:2px 8px;border-radius:4px;font-weight:bold">'
        f"{verdict.verdict}</span> {inline_html(verdict.reason)}</p><ul>{notes}</ul>"
        f"<p><small>results: <code>{html.escape(verdict.results or 'none')}</code></small></p>"
    ))
    for title, figure in lab.figures(verdict):
        # A heading above the figure, not a suptitle: the figures are laid out already, and a title added
        # now would sit on their panels' own titles.
        display(HTML(f"<h4>{html.escape(title)}</h4>"))
        show_figure(figure)


def show_figure(figure) -> None:
    """Display a figure once: closed, or the inline backend draws it again at the cell's end."""
    import matplotlib.pyplot as plt

    display(figure)
    plt.close(figure)


def action_button(description: str, action: Callable[[], None],
                  icon: str = "play") -> tuple[widgets.Button, widgets.Output]:
    """A button that runs `action` into its own output area: disabled while it runs, errors in one line."""
    button = widgets.Button(description=description, button_style="primary", icon=icon,
                            layout=widgets.Layout(width="auto"))
    output = widgets.Output()

    def on_click(_):
        output.clear_output()
        button.disabled = True
        with output:
            try:
                action()
            except PerflabError as err:
                print(f"perflab: {err}")
            finally:
                button.disabled = False

    button.on_click(on_click)
    return button, output


def run_panel(lab: Lab, machine: Machine) -> widgets.Widget:
    """Choose CPUs, quick or full, the number of runs (and the lab's own OPTIONS); press Run; see the verdict."""
    dropdowns = {name: widgets.Dropdown(options=options, value=options[0], description=name)
                 for name, options in lab.OPTIONS.items()}
    cpus = widgets.SelectMultiple(options=machine.online_cpus, value=tuple(machine.online_cpus),
                                  description="CPUs", rows=min(8, len(machine.online_cpus)))
    quick = widgets.Checkbox(value=True, description="quick (a first look, not a final answer)",
                             style={"description_width": "initial"}, layout=widgets.Layout(width="auto"))
    runs = widgets.IntSlider(value=10, min=3, max=60, description="runs")

    def run_lab():
        chosen = {name: dropdown.value for name, dropdown in dropdowns.items()}
        show_verdict(lab.run(cpus=list(cpus.value), quick=quick.value, runs=runs.value, **chosen), lab)

    button, output = action_button("Run", run_lab)
    controls = widgets.VBox([*dropdowns.values(), quick, runs, button])
    return widgets.VBox([widgets.HBox([cpus, controls]), output])
