"""Plots as inline SVG, drawn with matplotlib (the ``report`` extra).

Figures have transparent backgrounds; their text, axes and grid are drawn in placeholder
colors that become ``currentColor`` and a CSS variable in the page, so one SVG reads well in a
light and a dark browser theme. Series colors are mid-tones legible on both. Each SVG's ids
are prefixed so that several can live in one HTML document without their clip paths mixing.
Every plot takes binned data (counts and edges), never one mark per rollout.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["PALETTE", "Plotter"]

# Mid-tone colors with enough contrast on white and on near-black.
PALETTE = ("#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#a855f7", "#ec4899", "#14b8a6",
           "#94a3b8")
_FOREGROUND = "#010203"  # drawn as currentColor: the page's text color
_GRID = "#020304"  # drawn as var(--grid)
_WIDTH, _HEIGHT = 6.4, 2.8  # inches; the page scales the SVG to its column


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("the HTML report draws its plots with matplotlib, which is not "
                          "installed: pip install 'rewardsmith[report]'") from exc
    return matplotlib


class Plotter:
    """Makes the report's SVGs, numbering them for unique ids."""

    def __init__(self) -> None:
        self._mpl = _matplotlib()
        self.count = 0

    @contextmanager
    def _figure(self, height: float = _HEIGHT, *, labels: Sequence[str] = ()
                ) -> Iterator[tuple[Figure, Axes]]:
        """A figure with one axes. Margins are set from the text they must hold (``labels``:
        the category names on the y axis, else numbers and a y label), not by a layout
        engine, which would double the drawing time."""
        from matplotlib.figure import Figure

        style = {
            "svg.fonttype": "none", "svg.hashsalt": f"rewardsmith-{self.count}",
            "font.size": 9, "font.family": "sans-serif",
            "text.color": _FOREGROUND, "axes.labelcolor": _FOREGROUND,
            "axes.edgecolor": _FOREGROUND, "xtick.color": _FOREGROUND,
            "ytick.color": _FOREGROUND, "grid.color": _GRID, "grid.linewidth": 0.6,
            "axes.facecolor": "none", "figure.facecolor": "none", "savefig.facecolor": "none",
            "savefig.transparent": True, "legend.frameon": False, "axes.spines.top": False,
            "axes.spines.right": False, "axes.prop_cycle": self._mpl.cycler(color=PALETTE),
        }
        with self._mpl.rc_context(style):
            figure = Figure(figsize=(_WIDTH, height))
            widest = max((len(label) for label in labels), default=0)
            left = 0.2 + 0.07 * widest if labels else 0.75  # inches
            figure.subplots_adjust(left=min(left, 0.45 * _WIDTH) / _WIDTH, right=0.97,
                                   bottom=0.5 / height, top=1 - 0.12 / height)
            axes = figure.add_subplot()
            axes.grid(True, axis="y")
            axes.set_axisbelow(True)
            yield figure, axes

    def _svg(self, figure: Figure) -> str:
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        self.count += 1
        return _inline(buffer.getvalue(), f"plot{self.count}")

    def histogram(self, counts: Sequence[int], edges: Sequence[float], *, discrete: bool,
                  xlabel: str, color: str = PALETTE[0]) -> str:
        """Bars of a binned series (``discrete``: one bar per value in ``edges``)."""
        with self._figure() as (figure, axes):
            if discrete:
                width = _bar_width(edges)
                axes.bar(edges, counts, width=width, color=color)
            else:
                axes.stairs(counts, edges, fill=True, color=color)
            axes.set_xlabel(_plain(xlabel))
            axes.set_ylabel("rollouts")
            return self._svg(figure)

    def overlaid(self, series: Sequence[tuple[str, Sequence[int]]], edges: Sequence[float],
                 *, xlabel: str, log: bool = True) -> str:
        """Several histograms over the same bins, as outlines with a legend."""
        with self._figure(3.4) as (figure, axes):
            for index, (name, counts) in enumerate(series):
                axes.stairs(counts, edges, label=_plain(name), color=PALETTE[index % len(PALETTE)],
                            linewidth=1.4)
            if log:
                axes.set_yscale("symlog", linthresh=1)
            axes.set_xlabel(xlabel)
            axes.set_ylabel("rollouts")
            axes.legend(loc="upper right", ncols=2, fontsize=8)
            return self._svg(figure)

    def bars(self, labels: Sequence[str], values: Sequence[float], *, xlabel: str,
             colors: Sequence[str] | None = None, log: bool = False) -> str:
        """Horizontal bars, one per label."""
        height = max(1.6, 0.32 * len(labels) + 0.9)
        with self._figure(height, labels=labels) as (figure, axes):
            axes.grid(False, axis="y")
            axes.grid(True, axis="x")
            positions = list(range(len(labels)))
            axes.barh(positions, values, color=list(colors) if colors else PALETTE[0])
            axes.set_yticks(positions, [_plain(label) for label in labels])
            axes.invert_yaxis()
            if log:
                axes.set_xscale("log")
            axes.set_xlabel(xlabel)
            return self._svg(figure)

    def grouped_bars(self, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]],
                     *, xlabel: str, log: bool = False) -> str:
        """Horizontal bars, several per label (one per series)."""
        height = max(1.8, 0.42 * len(labels) * max(1, len(series)) / 2 + 1.0)
        with self._figure(height, labels=labels) as (figure, axes):
            axes.grid(False, axis="y")
            axes.grid(True, axis="x")
            step = 0.8 / max(1, len(series))
            for index, (name, values) in enumerate(series):
                positions = [i - 0.4 + step * (index + 0.5) for i in range(len(labels))]
                axes.barh(positions, values, height=step, label=_plain(name),
                          color=PALETTE[index % len(PALETTE)])
            axes.set_yticks(list(range(len(labels))), [_plain(label) for label in labels])
            axes.invert_yaxis()
            if log:
                axes.set_xscale("log")
            axes.set_xlabel(xlabel)
            axes.legend(loc="best", fontsize=8)
            return self._svg(figure)

    def curves(self, steps: Sequence[int], series: Sequence[tuple[str, Sequence[float | None]]],
               *, window: int = 1, ylabel: str) -> str:
        """One line per series over training steps (None: a gap). With ``window`` > 1, each
        step is drawn faintly and the mean of the last ``window`` steps as the line; the first
        series (the reward) is drawn thicker."""
        with self._figure(3.4) as (figure, axes):
            for index, (name, values) in enumerate(series):
                color = PALETTE[index % len(PALETTE)]
                raw = [math.nan if v is None else v for v in values]
                width = 2.0 if index == 0 else 1.3
                marker = "o" if len(steps) <= 40 and window == 1 else None
                if window > 1:
                    axes.plot(steps, raw, color=color, alpha=0.25, linewidth=0.8)
                    raw = _moving_mean(raw, window)
                axes.plot(steps, raw, color=color, linewidth=width, marker=marker,
                          markersize=3, label=_plain(name))
            axes.set_xlabel("training step")
            axes.set_ylabel(ylabel)
            axes.legend(loc="best", ncols=2, fontsize=8)
            return self._svg(figure)

    def boxes(self, labels: Sequence[str], stats: Sequence[dict[str, float]], *,
              xlabel: str, ylabel: str) -> str:
        """Box plots from precomputed quartiles (``whislo``, ``q1``, ``med``, ``q3``,
        ``whishi``, ``mean``): no per-rollout points."""
        with self._figure() as (figure, axes):
            boxes = [{**s, "label": _plain(label), "fliers": []}
                     for label, s in zip(labels, stats)]
            axes.bxp(boxes, showmeans=True, showfliers=False, patch_artist=True,
                     boxprops={"facecolor": PALETTE[0], "alpha": 0.55,
                               "edgecolor": _FOREGROUND},
                     medianprops={"color": PALETTE[1], "linewidth": 1.6},
                     meanprops={"marker": "D", "markerfacecolor": PALETTE[2],
                                "markeredgecolor": PALETTE[2], "markersize": 4},
                     whiskerprops={"color": _FOREGROUND}, capprops={"color": _FOREGROUND})
            axes.set_xlabel(xlabel)
            axes.set_ylabel(ylabel)
            return self._svg(figure)


def _plain(text: str) -> str:
    """A user's name as matplotlib text: "$" escaped, so it is a character, not TeX (tick
    labels of log axes still use matplotlib's own math)."""
    return text.replace("$", r"\$")


def _moving_mean(values: Sequence[float], window: int) -> list[float]:
    """The mean of each value and the ``window - 1`` before it, NaNs (gaps) left out."""
    out = []
    for end in range(1, len(values) + 1):
        kept = [v for v in values[max(0, end - window):end] if not math.isnan(v)]
        out.append(math.fsum(kept) / len(kept) if kept else math.nan)
    return out


def _bar_width(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.6 * max(abs(values[0]), 1.0) if values else 1.0
    gaps = [b - a for a, b in zip(values, values[1:]) if b > a]
    smallest = min(gaps) if gaps else 1.0
    return 0.8 * smallest if math.isfinite(smallest) else 1.0


_ID = re.compile(r'id="([^"]+)"')
_URL = re.compile(r"url\(#([^)]+)\)")
_HREF = re.compile(r'href="#([^"]+)"')


def _inline(svg: str, prefix: str) -> str:
    """The ``<svg>`` element alone, ids prefixed, placeholder colors made themeable."""
    start = svg.find("<svg")
    body = svg[start:] if start >= 0 else svg
    body = re.sub(r"<metadata>.*?</metadata>|<!--.*?-->", "", body, flags=re.DOTALL)
    body = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', body)
    body = _URL.sub(lambda m: f"url(#{prefix}-{m.group(1)})", body)
    body = _HREF.sub(lambda m: f'href="#{prefix}-{m.group(1)}"', body)
    body = body.replace(_FOREGROUND, "currentColor").replace(_GRID, "var(--grid)")
    return body.replace("<svg ", f'<svg role="img" data-plot="{prefix}" ', 1).strip()
