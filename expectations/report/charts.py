"""The report's micro-batch charts, drawn with matplotlib into inline SVG.

No pyplot: a Figure per chart and rc_context for the settings, so nothing global changes in a
process that also runs Spark or Airflow. The same micro-batches always give the same SVG (fixed
hash salt, no date), so a re-rendered page only changes when its report does.
"""

from __future__ import annotations

import io
import math
import re

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from jobs.changelog.kinds import SHORT_NAMES

FIGSIZE = (7, 2.6)
# Fixed margins instead of a layout engine (which doubles the drawing time); tick labels are
# kept short by _compact so they fit.
MARGINS = {"left": 0.1, "right": 0.91, "bottom": 0.19, "top": 0.87}
KIND_COLOURS = {"+I": "#2da44e", "-U": "#e09b2d", "+U": "#218bff", "-D": "#cf222e"}
STATE_COLOUR, SECONDS_COLOUR = "#8250df", "#57606a"


def changelog_chart(micro_batches: list[dict]) -> str:
    """Stacked bars: the sink changes (+I, -U, +U, -D) each micro-batch wrote."""
    with _style("changelog"):
        figure, axes = _figure("Output changelog per micro-batch", "sink changes")
        batches = [b["batch"] for b in micro_batches]
        bottom = [0] * len(batches)
        for kind in SHORT_NAMES:
            counts = [(b.get("changelog") or {}).get(kind, 0) or 0 for b in micro_batches]
            axes.bar(batches, counts, bottom=bottom, label=kind, color=KIND_COLOURS[kind], width=0.7)
            bottom = [low + count for low, count in zip(bottom, counts)]
        axes.legend(loc="upper left", ncols=len(SHORT_NAMES), fontsize=8, frameon=False)
        axes.set_ylim(0, max(max(bottom, default=0), 1) * 1.25)  # room for the legend
        return _svg(figure, "changelog", "sink changes (+I, -U, +U, -D) per micro-batch")


def state_chart(micro_batches: list[dict]) -> str:
    """State rows (left axis) and seconds (right axis) per micro-batch."""
    with _style("state"):
        figure, axes = _figure("State size and duration per micro-batch", "state rows")
        batches = [b["batch"] for b in micro_batches]
        state = [_number(b.get("state_rows")) for b in micro_batches]
        lines = axes.plot(batches, state, marker="o", markersize=3, color=STATE_COLOUR, label="state rows")
        seconds_axes = axes.twinx()
        seconds_axes.spines["right"].set_visible(True)
        seconds_axes.set_ylabel("seconds")
        seconds_axes.set_ylim(0, max([b.get("seconds") or 0 for b in micro_batches] + [0.1]) * 1.2)
        lines += seconds_axes.plot(
            batches,
            [_number(b.get("seconds")) for b in micro_batches],
            marker="s",
            markersize=3,
            linestyle="--",
            color=SECONDS_COLOUR,
            label="seconds",
        )
        axes.set_ylim(bottom=0)
        axes.legend(lines, [line.get_label() for line in lines], loc="lower right", fontsize=8, frameon=False)
        return _svg(figure, "state", "state rows and seconds per micro-batch")


def _style(name: str):
    # A salt per chart keeps the clip-path ids of the two SVGs apart on one page; text stays
    # text (fonttype none): smaller, selectable, drawn in the page's font.
    return matplotlib.rc_context(
        {
            "svg.hashsalt": f"lockstep-{name}",
            "svg.fonttype": "none",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )


def _figure(title: str, ylabel: str):
    figure = Figure(figsize=FIGSIZE)
    figure.subplots_adjust(**MARGINS)
    axes = figure.add_subplot()
    axes.set_title(title, loc="left", fontsize=10)
    axes.set_xlabel("micro-batch")
    axes.set_ylabel(ylabel)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.yaxis.set_major_formatter(FuncFormatter(_compact))
    return figure, axes


def _svg(figure: Figure, name: str, label: str) -> str:
    """The <svg> element alone: no XML prolog or DOCTYPE (invalid inside HTML), no RDF metadata,
    and matplotlib's group ids (figure_1, axes_1, ...) prefixed so two charts do not share them."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.DOTALL)
    svg = re.sub(r' id="([a-z]+(?:_[a-z]+)*_\d+)"', rf' id="{name}-\1"', svg)
    return svg.replace("<svg ", f'<svg class="chart" data-chart="{name}" role="img" aria-label="{label}" ', 1)


def _compact(value: float, _position=None) -> str:
    """1500 -> 1.5k, 2000000 -> 2M: four characters at most for the counts seen in practice."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:g}"


def _number(value) -> float:
    # A micro-batch without a state figure is a gap in the line, not a zero.
    return math.nan if value is None else value
