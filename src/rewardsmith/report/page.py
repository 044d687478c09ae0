"""The page around the sections: one HTML document with its own CSS, no scripts, nothing
fetched. Colors come from CSS variables that follow the browser's light or dark theme."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Section", "count", "esc", "figure", "number", "page", "seconds", "share", "signed",
           "table"]

_CSS = """
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1f2328; --muted: #59636e;
  --grid: #d0d7de; --card: #f6f8fa; --line: #d0d7de; --accent: #0969da;
  --warn-bg: #fff8c5; --warn-fg: #4d2d00; --bad: #cf222e; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --grid: #3d444d; --card: #161b22;
    --line: #3d444d; --accent: #4493f8; --warn-bg: #3b2e00; --warn-fg: #f2cc60;
    --bad: #ff7b72; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5rem 1rem 4rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .6rem; padding-bottom: .3rem;
  border-bottom: 1px solid var(--line); }
h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
a { color: var(--accent); }
p.note, .muted { color: var(--muted); }
nav.toc { display: flex; flex-wrap: wrap; gap: .3rem .9rem; margin: .8rem 0 0;
  padding: .6rem .8rem; background: var(--card); border: 1px solid var(--line);
  border-radius: 6px; }
table { border-collapse: collapse; margin: .4rem 0 .8rem; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--line); padding: .2rem .55rem; vertical-align: top; }
th { background: var(--card); text-align: left; font-weight: 600; }
td.n { text-align: right; white-space: nowrap; }
code, pre { font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
  padding: .6rem .8rem; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 28rem;
  overflow: auto; }
figure.plot { margin: .6rem 0 1rem; color: var(--fg); }
figure.plot svg { display: block; width: 100%; max-width: 680px; height: auto; }
figure.plot figcaption { color: var(--muted); font-size: .9em; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr));
  gap: 0 1.2rem; }
.warnings { background: var(--warn-bg); color: var(--warn-fg); border-radius: 6px;
  padding: .4rem 1rem; }
.bad { color: var(--bad); font-weight: 600; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(160px, 1fr));
  gap: .7rem; margin: .4rem 0 1rem; }
.card { background: var(--card); border: 1px solid var(--line);
  border-radius: 6px; padding: .5rem .8rem; }
.card .label { color: var(--muted); font-size: .85em; }
.card .value { font-size: 1.45rem; font-weight: 600; }
.card .muted { font-size: .85em; }
.side { display: flex; flex-wrap: wrap; gap: 0 1.5rem; align-items: flex-start; }
.side figure.plot { flex: 1 1 380px; margin-top: .4rem; }
article.rollout { border: 1px solid var(--line); border-radius: 6px; padding: .2rem 1rem .6rem;
  margin: .8rem 0; }
article.rollout:target { outline: 2px solid var(--accent); }
"""


@dataclass(frozen=True)
class Section:
    """One part of the page: its anchor, its heading and its HTML body."""

    anchor: str
    title: str
    body: str


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def number(value: float | None, digits: int = 4) -> str:
    """A value for a table: ``-`` when unknown, else ``digits`` significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"


def signed(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:+.{digits}g}"


def count(value: int) -> str:
    return f"{value:,}"


def seconds(value: float | None) -> str:
    """A duration as people read it: µs, ms or s."""
    if value is None:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def share(part: int, whole: int) -> str:
    return "-" if whole == 0 else f"{100 * part / whole:.1f}%"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *,
          numeric: Sequence[bool] | None = None, cls: str = "") -> str:
    """A table of already-escaped cells; ``numeric[i]`` right-aligns column ``i``. Headers
    that are all empty make a table without a header row (name, value pairs)."""
    flags = list(numeric) if numeric is not None else [False] * len(headers)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{cell}</td>' if flags[i] else f"<td>{cell}</td>"
            for i, cell in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    attribute = f' class="{cls}"' if cls else ""
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    return f"<table{attribute}>{thead}<tbody>{''.join(body)}</tbody></table>"


def figure(svg: str, caption: str, name: str) -> str:
    return (f'<figure class="plot" id="plot-{esc(name)}">{svg}'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def page(title: str, subtitle: str, sections: Sequence[Section]) -> str:
    toc = "".join(f'<a href="#{esc(s.anchor)}">{esc(s.title)}</a>' for s in sections)
    body = "".join(f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>{s.body}</section>'
                   for s in sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head>"
        f"<body><main><header><h1>{esc(title)}</h1><p class=\"muted\">{subtitle}</p>"
        f'<nav class="toc">{toc}</nav></header>{body}</main></body></html>\n'
    )
