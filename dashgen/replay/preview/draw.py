"""A rendered dashboard drawn with matplotlib, panel by panel on Grafana's 24-column grid.

Not Grafana pixel for pixel: what each panel would show. Time series with their legends (the
newest value beside each name, as the panels' legend calcs ask), stacked where the panel stacks,
fixed colours where the panel fixes them, threshold lines and the annotations' marks; stats as
their newest value coloured by the thresholds; heatmaps one row per series; XY charts against
the training step; rows as bars. The output is deterministic: Agg, DejaVu Sans (shipped with
matplotlib), a fixed dpi and no metadata that changes between runs.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from dashgen.model import GRID_COLUMNS
from dashgen.replay.matplotlib_check import require_matplotlib
from dashgen.replay.preview.query import PanelResult, PreviewRun, Series
from dashgen.replay.preview.units import format_value

COLUMN_PX = 64  # 24 columns: 1536 px, about a laptop's Grafana
GRID_ROW_PX = 30  # Grafana's grid row height
HEADER_PX = 70
DPI = 100
GAP_PX = 4
# Grafana's classic palette, in its order.
PALETTE = ("#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0", "#508642",
           "#CCA300", "#447EBC", "#C15C17")
NAMED_COLOURS = {"green": "#56A64B", "red": "#E02F44", "yellow": "#F2CC0C", "blue": "#3274D9", "orange": "#FF9830",
                 "purple": "#A352CC"}
HEATMAP_SCHEMES = {"Viridis": "viridis", "Oranges": "Oranges", "Turbo": "turbo", "Blues": "Blues", "Reds": "Reds"}
# A legend column's width, and its text: a series' name longer than its column is cut with an
# ellipsis, its value never (the value is what a legend is read for). Sizes in points, spacings in
# the legend's font size, as matplotlib's legend takes them.
LEGEND_COLUMN_PX, LEGEND_FONT_PT = 240, 6.5
LEGEND_HANDLE, LEGEND_HANDLE_PAD, LEGEND_COLUMN_SPACING = 1.2, 0.4, 1.2
LEGEND_MARGIN_PX = 6  # from the panel's left and right edges, as the title is
PANEL_FACE, PANEL_EDGE, TEXT, MUTED = "#F7F8FA", "#D8D9DA", "#24292E", "#8E8E8E"


def _colour(name: str) -> str:
    return NAMED_COLOURS.get(name, name)


def draw_dashboard(model: dict[str, Any], results: dict[int, PanelResult], events: dict[str, list[float]],
                   preview: PreviewRun, path: Path, stamp: str = "") -> None:
    """Draw the dashboard `model` (rendered JSON) with the query `results` into the PNG at `path`;
    `stamp` (the JSON's digest, see stamp.py) is written into it."""
    require_matplotlib("dashgen preview")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.family": "DejaVu Sans", "font.size": 7, "axes.linewidth": 0.6,
                         "xtick.major.width": 0.5, "ytick.major.width": 0.5, "path.simplify": True})
    panels = model["panels"]
    grid_rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    width_px, height_px = GRID_COLUMNS * COLUMN_PX, HEADER_PX + grid_rows * GRID_ROW_PX
    figure = plt.figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI, facecolor="white")
    canvas = _Canvas(figure, width_px, height_px)
    _draw_header(canvas, model, preview, events)
    annotation_colours = {a["name"]: _colour(a.get("iconColor", "red"))
                          for a in model.get("annotations", {}).get("list", [])}
    marks = [(at, annotation_colours.get(name, "red")) for name, times in sorted(events.items()) for at in times]
    for panel in panels:
        if panel["type"] == "row":
            _draw_row(canvas, panel)
        else:
            _draw_panel(canvas, panel, results.get(panel["id"], PanelResult()), preview, marks)
    _save_png(figure, path, stamp)
    plt.close(figure)


# Colours kept in the saved PNG: a preview is flat colours and text, and a palette PNG of it is a
# third of the size of matplotlib's RGBA one for a repository to hold; 256 keeps a heatmap's scale smooth.
PNG_COLOURS = 256


def _save_png(figure, path: Path, stamp: str) -> None:
    """The figure as a palette PNG whose only text is the stamp (no software version, no time): byte-stable."""
    import io

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    from dashgen.replay.preview.stamp import STAMP_KEY

    info = PngInfo()
    if stamp:
        info.add_text(STAMP_KEY, stamp)

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    buffer.seek(0)
    with Image.open(buffer) as image:
        palette = image.convert("RGB").quantize(colors=PNG_COLOURS, method=Image.Quantize.MEDIANCUT,
                                                dither=Image.Dither.NONE)
    palette.save(path, format="PNG", optimize=True, pnginfo=info)


class _Canvas:
    """Pixel boxes of the grid, turned into the figure's fractions."""

    def __init__(self, figure, width_px: int, height_px: int):
        self.figure, self.width_px, self.height_px = figure, width_px, height_px

    def box(self, grid: dict[str, int]) -> tuple[float, float, float, float]:
        """(left, top, width, height) in pixels of a gridPos, the gap taken off."""
        return (grid["x"] * COLUMN_PX + GAP_PX / 2, HEADER_PX + grid["y"] * GRID_ROW_PX + GAP_PX / 2,
                grid["w"] * COLUMN_PX - GAP_PX, grid["h"] * GRID_ROW_PX - GAP_PX)

    def fraction(self, left: float, top: float, width: float, height: float) -> list[float]:
        return [left / self.width_px, 1 - (top + height) / self.height_px, width / self.width_px,
                height / self.height_px]

    def text(self, left: float, top: float, text: str, **style) -> None:
        self.figure.text(left / self.width_px, 1 - top / self.height_px, text, va="top", **style)


def _draw_header(canvas: _Canvas, model: dict[str, Any], preview: PreviewRun, events: dict[str, list[float]]) -> None:
    run = preview.run
    canvas.text(8, 8, model["title"], fontsize=13, weight="bold", color=TEXT)
    shown = time.strftime("%Y-%m-%d %H:%M", time.gmtime(preview.start)) + " to " + \
        time.strftime("%H:%M UTC", time.gmtime(preview.end))
    canvas.text(8, 30, f"dashgen preview of {run.path.name}: {', '.join(f'{k}={v}' for k, v in run.labels.items())}; "
                       f"{len(run.steps)} steps, {shown}", fontsize=8, color=MUTED)
    colours = {a["name"]: _colour(a.get("iconColor", "red")) for a in model.get("annotations", {}).get("list", [])}
    if events:
        canvas.text(8, 46, "annotations:", fontsize=8, color=MUTED)
    left = 80
    for name in sorted(events):
        label = f"\u2506 {name} ({len(events[name])})"
        canvas.text(left, 46, label, fontsize=8, color=colours.get(name, "red"))
        left += 6.5 * len(label) + 16


def _draw_row(canvas: _Canvas, row: dict[str, Any]) -> None:
    left, top, width, height = canvas.box(row["gridPos"])
    collapsed = row.get("collapsed", False)
    if collapsed:
        axes = canvas.figure.add_axes(canvas.fraction(left, top, width, height))
        axes.set_axis_off()
        axes.add_patch(_rectangle((0, 0), 1, 1, facecolor="#E4E7EB", edgecolor=PANEL_EDGE))
        label = f"\u25b8 {row['title']}  (collapsed: {len(row.get('panels', []))} panels)"
    else:
        label = f"\u25be {row['title']}"
    canvas.text(left + 4, top + 6, label, fontsize=10, weight="bold", color=TEXT)


def _rectangle(xy, width, height, **style):
    from matplotlib.patches import Rectangle

    return Rectangle(xy, width, height, **style)


def _draw_panel(canvas: _Canvas, panel: dict[str, Any], result: PanelResult, preview: PreviewRun,
                marks: list[tuple[float, str]]) -> None:
    left, top, width, height = canvas.box(panel["gridPos"])
    frame = canvas.figure.add_axes(canvas.fraction(left, top, width, height))
    frame.set_axis_off()
    frame.add_patch(_rectangle((0, 0), 1, 1, facecolor=PANEL_FACE, edgecolor=PANEL_EDGE, linewidth=0.8))
    title = result.title or panel["title"]
    canvas.text(left + 6, top + 4, title, fontsize=8, weight="bold", color=TEXT)
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "none")
    panel, result = _configured_from_data(panel, result)
    if not result.has_data:
        colour = "#C4162A" if result.reads_verl else MUTED
        canvas.figure.text((left + width / 2) / canvas.width_px, 1 - (top + height / 2) / canvas.height_px, "No data",
                           ha="center", va="center", fontsize=10, color=colour)
        return
    kind = panel["type"]
    if kind == "stat":
        _stat(canvas, panel, result, (left, top, width, height), unit)
    elif kind == "timeseries":
        _time_series(canvas, panel, result, (left, top, width, height), unit, preview, marks)
    elif kind == "heatmap":
        _heatmap(canvas, panel, result, (left, top, width, height), preview)
    elif kind == "xychart":
        _step_chart(canvas, panel, result, (left, top, width, height), unit)
    else:
        canvas.text(left + 6, top + 24, f"({kind} panels are not drawn by dashgen preview)", color=MUTED)


def _configured_from_data(panel: dict[str, Any], result: PanelResult) -> tuple[dict[str, Any], PanelResult]:
    """Grafana's "Config from query results" as dashgen writes it (a threshold the run's data sets): the
    config query's newest value becomes the first threshold above the base, and its series is not drawn."""
    for transformation in panel.get("transformations", []):
        if transformation["id"] != "configFromData":
            continue
        config_ref = transformation["options"]["configRefId"]
        config = [s for s in result.series if s.ref_id == config_ref and s.values]
        result = PanelResult(result.title, [s for s in result.series if s.ref_id != config_ref], result.reads_verl)
        steps = [dict(step) for step in _threshold_steps(panel)]
        if config and len(steps) > 1 and not math.isnan(_last(config[0])):
            steps[1]["value"] = _last(config[0])
            defaults = panel["fieldConfig"]["defaults"]
            panel = {**panel, "fieldConfig": {**panel["fieldConfig"], "defaults": {
                **defaults, "thresholds": {**defaults["thresholds"], "steps": steps}}}}
    return panel, result


# The largest magnitude drawn: matplotlib's axis limits and ticks overflow near a float's largest
# (1.8e308); a value beyond it (a logged 1e308, an integer of 400 digits served as an infinity) is
# drawn as a gap, as matplotlib draws an infinity. The legend and stats show the value itself.
MAX_DRAWN = 1e300


def _drawn(values) -> list[float]:
    return [value if abs(value) <= MAX_DRAWN else math.nan for value in values]


def _last(series: Series) -> float:
    finite = [v for v in series.values if not math.isnan(v)]
    return finite[-1] if finite else math.nan


def _threshold_steps(panel: dict[str, Any]) -> list[dict[str, Any]]:
    return panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])


def _stat(canvas: _Canvas, panel: dict[str, Any], result: PanelResult, box, unit: str) -> None:
    left, top, width, height = box
    steps = _threshold_steps(panel) or [{"color": "green", "value": None}]
    shown = result.series[:4]
    cell = width / len(shown)
    size = max(9.0, min(26.0, (height - 24) * 0.45, cell / 7))
    for index, series in enumerate(shown):
        value = _last(series)
        colour = "green"
        for step in steps:
            if step["value"] is None or (not math.isnan(value) and value >= step["value"]):
                colour = step["color"]
        centre = left + cell * (index + 0.5)
        canvas.figure.text(centre / canvas.width_px, 1 - (top + 22 + (height - 36) / 2) / canvas.height_px,
                           format_value(value, unit), ha="center", va="center", fontsize=size, weight="bold",
                           color=_colour(colour))
        if len(result.series) > 1 or series.name:
            canvas.figure.text(centre / canvas.width_px, 1 - (top + height - 6) / canvas.height_px,
                               _shorten(series.name, int(cell / 5)), ha="center", va="bottom", fontsize=6, color=MUTED)
    if len(result.series) > len(shown):
        canvas.text(left + width - 60, top + 4, f"+{len(result.series) - len(shown)} more", fontsize=6, color=MUTED)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "\u2026"


def _series_colours(panel: dict[str, Any], series: list[Series]) -> list[str]:
    fixed = {}
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        if override["matcher"]["id"] == "byFrameRefID":
            for item in override["properties"]:
                if item["id"] == "color":
                    fixed[override["matcher"]["options"]] = item["value"]["fixedColor"]
    return [fixed.get(s.ref_id, PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)]


def _plot_area(canvas: _Canvas, box, legend_items: int, unit: str):
    """Axes inside a panel box, leaving room for the title, the tick labels and a legend below."""
    left, top, width, height = box
    columns = max(1, min(legend_items, int(width // LEGEND_COLUMN_PX)))
    legend_rows = math.ceil(legend_items / columns) if legend_items else 0
    legend_px = min(legend_rows, max(1, int((height - 70) // 11))) * 11
    # Room for the longest tick label: a number and, for a custom unit, its name.
    pad_left = min(110, 52 + 5 * len(unit.partition(":")[2])) if ":" in unit else 66
    axes = canvas.figure.add_axes(canvas.fraction(left + pad_left, top + 20, width - pad_left - 10,
                                                  height - 20 - 16 - legend_px - 4))
    axes.set_facecolor(PANEL_FACE)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        axes.spines[side].set_color(PANEL_EDGE)
    axes.tick_params(labelsize=6.5, colors=MUTED, length=2)
    axes.grid(True, color="#E6E7E8", linewidth=0.5)
    return axes, columns, legend_px, legend_rows


def _legend(axes, box, handles, entries: list[tuple[str, str]], columns: int, legend_px: int,
            rows_wanted: int) -> None:
    """The legend under the axes, from the panel's left edge to its right (under the value axis' labels,
    as Grafana's): each entry a series' name and its newest value, the name shortened to fit its column."""
    if not handles:
        return
    shown_rows = legend_px // 11
    if rows_wanted > shown_rows:  # as many as fit, then how many more (Grafana scrolls them)
        from matplotlib.lines import Line2D

        keep = shown_rows * columns - 1
        hidden = len(handles) - keep
        handles = [*handles[:keep], Line2D([], [], color="none")]
        entries = [*entries[:keep], (f"+{hidden} more", "")]
    left, _, width, _ = box
    extent = axes.get_window_extent()
    em = LEGEND_FONT_PT * DPI / 72
    room = width - 2 * LEGEND_MARGIN_PX
    column = (room - (columns - 1) * LEGEND_COLUMN_SPACING * em) / columns - (LEGEND_HANDLE + LEGEND_HANDLE_PAD) * em
    measure = _text_width(axes.figure)
    labels = [_fitted(name, value, column, measure) for name, value in entries]
    axes.legend(handles, labels, loc="upper left", ncol=columns,
                bbox_to_anchor=((left + LEGEND_MARGIN_PX - extent.x0) / max(extent.width, 1),
                                -16 / max(extent.height, 1)),
                fontsize=LEGEND_FONT_PT, frameon=False, handlelength=LEGEND_HANDLE, handletextpad=LEGEND_HANDLE_PAD,
                columnspacing=LEGEND_COLUMN_SPACING, borderaxespad=0, borderpad=0, labelspacing=0.25)


def _text_width(figure):
    """A function giving the width in pixels of a legend's text, as the figure's renderer draws it."""
    from matplotlib.font_manager import FontProperties

    renderer = figure.canvas.get_renderer()
    font = FontProperties(family="DejaVu Sans", size=LEGEND_FONT_PT)
    return lambda text: renderer.get_text_width_height_descent(text, font, ismath=False)[0]


def _fitted(name: str, value: str, room: float, measure) -> str:
    """`name  value` within `room` pixels: the name cut with an ellipsis as far as needed, the value whole
    (cut itself only when not even one letter of the name fits beside it)."""
    def label(kept: int) -> str:
        shown = name if kept >= len(name) else name[:kept] + "\u2026"
        return f"{shown}  {value}" if value else shown

    if measure(label(len(name))) <= room:
        return label(len(name))
    low, high = 0, len(name) - 1  # the longest cut that fits, by bisection
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if measure(label(middle)) <= room else (low, middle - 1)
    if low:
        return label(low)
    return _shorten(label(len(name)), max(1, int(room / (LEGEND_FONT_PT * DPI / 72 * 0.6))))


def _time_axis(axes, preview: PreviewRun) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter

    span = preview.end - preview.start
    spacing = next((s for s in (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
                    if span / s <= 6), 86400 * math.ceil(span / 86400 / 6))
    first = math.ceil(preview.start / spacing) * spacing
    axes.xaxis.set_major_locator(FixedLocator([first + i * spacing for i in range(int(span // spacing) + 1)]))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: time.strftime("%H:%M", time.gmtime(x))))
    axes.set_xlim(preview.start, preview.end)


def _value_axis(axes, panel: dict[str, Any], unit: str) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    axes.yaxis.set_major_locator(MaxNLocator(nbins=4))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda y, _: format_value(y, unit)))
    low, high = axes.get_ylim()
    axes.set_ylim(defaults.get("min", low), defaults.get("max", high))


def _time_series(canvas: _Canvas, panel: dict[str, Any], result: PanelResult, box, unit: str, preview: PreviewRun,
                 marks: list[tuple[float, str]]) -> None:
    series = [s for s in result.series if s.values]
    axes, columns, legend_px, legend_rows = _plot_area(canvas, box, len(series), unit)
    colours = _series_colours(panel, series)
    custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})
    handles = []
    if custom.get("stacking", {}).get("mode", "none") != "none":
        times = sorted({at for s in series for at in s.times})
        stacked = [_drawn(dict(zip(s.times, s.values)).get(at, 0.0) for at in times) for s in series]
        handles = axes.stackplot(times, stacked, colors=colours, alpha=0.85, linewidth=0)
    else:
        for s, colour in zip(series, colours):
            (line,) = axes.plot(s.times, _drawn(s.values), color=colour, linewidth=1.0)
            handles.append(line)
    for at, colour in marks:
        axes.axvline(at, color=colour, linewidth=0.7, alpha=0.55, linestyle=(0, (3, 2)))
    for step in _threshold_steps(panel):
        if step["value"] is not None and custom.get("thresholdsStyle", {}).get("mode") == "line":
            axes.axhline(step["value"], color=_colour(step["color"]), linewidth=0.9, linestyle=(0, (4, 2)))
    _time_axis(axes, preview)
    _value_axis(axes, panel, unit)
    entries = [(s.name, format_value(_last(s), unit)) for s in series]
    _legend(axes, box, handles, entries, columns, legend_px, legend_rows)


def _heatmap(canvas: _Canvas, panel: dict[str, Any], result: PanelResult, box, preview: PreviewRun) -> None:
    import numpy as np

    options = panel.get("options", {})
    colour = options.get("color", {})
    series = sorted((s for s in result.series if s.values), key=lambda s: s.name)
    left, top, width, height = box
    axes = canvas.figure.add_axes(canvas.fraction(left + 80, top + 20, width - 90 - 40, height - 20 - 18))
    times = sorted({at for s in series for at in s.times})
    grid = np.full((len(series), len(times)), np.nan)
    index = {at: i for i, at in enumerate(times)}
    for row, s in enumerate(series):
        for at, value in zip(s.times, _drawn(s.values)):
            grid[row, index[at]] = value
    image = axes.imshow(grid, aspect="auto", interpolation="nearest", origin="lower",
                        extent=(times[0], times[-1], 0, len(series)),
                        cmap=HEATMAP_SCHEMES.get(colour.get("scheme", "Viridis"), "viridis"),
                        vmin=colour.get("min"), vmax=colour.get("max"))
    axes.set_yticks([i + 0.5 for i in range(len(series))], [_shorten(s.name, 14) for s in series], fontsize=6)
    axes.tick_params(labelsize=6.5, colors=MUTED, length=2)
    _time_axis(axes, preview)
    bar = canvas.figure.colorbar(image, cax=canvas.figure.add_axes(
        canvas.fraction(left + width - 36, top + 20, 8, height - 20 - 18)))
    unit = options.get("cellValues", {}).get("unit", "none")
    from matplotlib.ticker import FuncFormatter

    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: format_value(y, unit)))
    bar.ax.tick_params(labelsize=5.5, colors=MUTED, length=2)


def _step_chart(canvas: _Canvas, panel: dict[str, Any], result: PanelResult, box, unit: str) -> None:
    """Query A is the training step, B the value; a sample of B pairs with A's at the same time and labels."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    steps = {_run_of(s): dict(zip(s.times, s.values)) for s in result.series if s.ref_id == "A"}
    lines = []
    for s in result.series:
        if s.ref_id == "A" or _run_of(s) not in steps:
            continue
        step_at = steps[_run_of(s)]
        points = sorted((step_at[at], value) for at, value in zip(s.times, s.values) if at in step_at)
        lines.append((s.labels.get("experiment", s.name), points))
    axes, columns, legend_px, legend_rows = _plot_area(canvas, box, len(lines), unit)
    handles, entries = [], []
    for index, (name, points) in enumerate(lines):
        (line,) = axes.plot([p[0] for p in points], _drawn(p[1] for p in points),
                            color=PALETTE[index % len(PALETTE)], linewidth=1.0)
        handles.append(line)
        entries.append((name, format_value(points[-1][1], unit) if points else ""))
    axes.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"step {x:.0f}"))
    _value_axis(axes, panel, unit)
    _legend(axes, box, handles, entries, columns, legend_px, legend_rows)


def _run_of(series: Series) -> tuple[str, ...]:
    return tuple(series.labels.get(name, "") for name in ("job", "instance", "project", "experiment"))
