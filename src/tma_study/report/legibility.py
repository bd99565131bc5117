"""What makes a figure unreadable in print, checked on the drawn figure before it is saved
(``tma_study.report.figures.finish`` raises ``FigureError`` naming each problem):

- wider than the paper prints it (IEEEtran: a column is 3.49 in, the page 7.14 in), so that the
  paper scales it down and its text with it;
- text smaller than 7 pt at that size, or cut off at the figure's edge;
- a legend over data (a point, a line or a bar of any axes it covers) or over another legend;
- microseconds written "us" (µs is the unit).

The paper's test checks the other half: that a figure is included at its own width or wider.
"""
from __future__ import annotations

import re

import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer
from matplotlib.legend import Legend
from matplotlib.text import Text

COLUMN_IN = 3.48          # IEEEtran's column width (252 pt)
PAGE_IN = 7.14            # IEEEtran's text width (516 pt: a figure* across both columns)
MIN_FONT_PT = 7.0         # the smallest text a reader can read in print
MARKER_SLACK_PX = 2.0     # a point this close to a legend's box is under it (its marker is)
EDGE_PX = 1.5             # text must end this far inside the figure (its extent differs a little by dpi)
MICROSECONDS_AS_US = re.compile(r"(?<![A-Za-z])us(?![A-Za-z])")


class FigureError(ValueError):
    """The figure would be unreadable in print; the message names each problem."""


def problems(fig) -> list[str]:
    """Every problem of ``fig`` (drawn here), in words; empty when it is legible."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    width = fig.get_size_inches()[0]
    if width > PAGE_IN + 0.01:
        found.append(f"{width:.2f} in wide: the paper prints it at most {PAGE_IN} in wide")
    ticks = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)      # laid out by tight_layout;
             for tick in axis.get_major_ticks() + axis.get_minor_ticks()        # those off the axes are not drawn
             for label in (tick.label1, tick.label2)}
    for text in fig.findobj(Text):
        content = text.get_text().strip()
        if not content or not text.get_visible():
            continue
        if text.get_fontsize() < MIN_FONT_PT - 1e-6:
            found.append(f"text {content[:30]!r} at {text.get_fontsize():.1f} pt (at least {MIN_FONT_PT:g})")
        box, page = text.get_window_extent(renderer), fig.bbox
        inner = page.padded(-EDGE_PX)
        if id(text) not in ticks and (box.x0 < inner.x0 or box.x1 > inner.x1 or box.y0 < inner.y0 or box.y1 > inner.y1):
            found.append(f"text {content[:30]!r} runs off the figure")
        if MICROSECONDS_AS_US.search(content):
            found.append(f"text {content[:40]!r} writes microseconds as 'us' (write µs)")
    legends = [(legend, legend.get_window_extent(renderer)) for legend in _legends(fig)]
    for i, (legend, box) in enumerate(legends):
        for other, other_box in legends[i + 1:]:
            if box.overlaps(other_box):
                found.append(f"legend {_title(legend)} overlaps legend {_title(other)}")
        for text in fig.texts:
            if text.get_text().strip() and box.overlaps(text.get_window_extent(renderer)):
                found.append(f"legend {_title(legend)} overlaps the text {text.get_text()[:30]!r}")
        for ax in _axes_under(fig, legend):
            if _covers_data(ax, box, renderer):
                found.append(f"legend {_title(legend)} lies over data of the axes {ax.get_title()!r}")
    return found


def check(fig) -> None:
    found = problems(fig)
    if found:
        raise FigureError("the figure is not legible in print:\n  " + "\n  ".join(found))


def _legends(fig) -> list[Legend]:
    inside = [child for ax in fig.axes for child in ax.get_children() if isinstance(child, Legend)]
    return inside + list(fig.legends)


def _axes_under(fig, legend):
    """The axes whose data a legend can cover: its own, or for a figure legend every axes."""
    return fig.axes if legend in fig.legends else [legend.axes]


def _title(legend) -> str:
    title = legend.get_title().get_text()
    labels = [t.get_text() for t in legend.get_texts()][:2]
    return repr(title or ", ".join(labels))


def _covers_data(ax, box, renderer) -> bool:
    grown = box.expanded(1.0, 1.0).padded(MARKER_SLACK_PX)
    for points in _data_points(ax):
        finite = points[np.isfinite(points).all(axis=1)]
        inside = ((finite[:, 0] > grown.x0) & (finite[:, 0] < grown.x1)
                  & (finite[:, 1] > grown.y0) & (finite[:, 1] < grown.y1))
        if inside.any():
            return True
    bars = [patch for container in ax.containers if isinstance(container, BarContainer) for patch in container]
    return any(bar.get_visible() and bar.get_window_extent(renderer).overlaps(box) for bar in bars)


def _data_points(ax):
    """Display coordinates of what ``ax`` draws as data: line vertices (and points along each
    segment, so a line that crosses a legend counts) and scatter points."""
    for line in ax.get_lines():
        if not line.get_visible() or len(line.get_xydata()) == 0:
            continue
        vertices = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        if line.get_linestyle() in ("None", "none", "", " ") or len(vertices) < 2:
            yield vertices
            continue
        steps = np.linspace(0.0, 1.0, 24)[:, None]
        yield np.concatenate([a + steps * (b - a) for a, b in zip(vertices[:-1], vertices[1:])])
    for collection in ax.collections:
        offsets = collection.get_offsets()
        if isinstance(collection, PathCollection) and collection.get_visible() and len(offsets):
            yield collection.get_offset_transform().transform(np.asarray(offsets, dtype=float))
