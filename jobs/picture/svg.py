"""The job's timeline picture as one SVG document: plain XML, no script, no external reference, every text from a
log masked (``common.secrets``), made printable and escaped. It scales with its box (a viewBox, ``width="100%"``),
is read at 400 px (sizes below are chosen for that: the smallest text is 11 px there, 8.5 px in the web chat's
bubble), and follows the reader's dark mode (``prefers-color-scheme`` in its own style, scoped to its root class so
that an inlined copy restyles nothing else).

Stable names for whoever reads it back: ``g.node[data-node]`` holds ``g.lane[data-rank][data-node]`` (classes
``first-failure``, ``absent``, ``no-log``, ``launcher``), each lane holds ``text.lane-label`` and its marks,
``.mark`` with one of ``first-failure``, ``failure``, ``consequence``, ``symptom`` (and ``untimed``), ``data-rank``,
``data-category``, ``data-at`` (seconds on the axis); ``rect.after-first-failure`` greys what followed it."""

from __future__ import annotations

import math
import re
import unicodedata
from html import escape as _html_escape

from common.language import Lang, say
from common.secrets import mask
from common.textsafe import printable
from jobs.picture.lanes import JobPicture, Lane, Mark

WIDTH = 480  # viewBox units; shown at 400 px a unit is 5/6 px (in the web chat's bubble at 400 px, 2/3 px)
MAX_SHOWN_PX = 680  # wider than this it stops growing: the text would only get bigger
PAD = 8
LABEL_W = 84
X0, X1 = PAD + LABEL_W, WIDTH - PAD - 6  # the plot's extent
INSET = 9  # a mark at the axis' ends stays inside the plot
LANE_H, NODE_H, LINE_H = 21, 21, 18
FONT = {"title": 17, "sub": 13, "label": 14, "node": 13, "tick": 13, "legend": 13}
MARK_R = {"first": 8.0, "failure": 5.5, "consequence": 4.6, "symptom": 4.6}
MARK_CLASS = {"first": "first-failure", "failure": "failure", "consequence": "consequence", "symptom": "symptom"}
DRAW_ORDER = {"consequence": 0, "symptom": 1, "failure": 2, "first": 3}  # the first failure on top
STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 4 * 3600, 6 * 3600,
         12 * 3600, 86400)
MAX_TICKS = 5
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

STYLE = """
.traindoc-timeline { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans CJK SC", sans-serif; }
.traindoc-timeline .bg { fill: #ffffff; }
.traindoc-timeline .fg { fill: #1f2328; }
.traindoc-timeline .muted { fill: #59636e; }
.traindoc-timeline .lane-bg { fill: #f3f5f7; }
.traindoc-timeline .rule { stroke: #c9d1d9; stroke-width: 1; }
.traindoc-timeline .hatch-line { stroke: #9aa4ae; stroke-width: 1.6; }
.traindoc-timeline .after-first-failure { fill: #8c959f; fill-opacity: 0.16; }
.traindoc-timeline .first-failure-line { stroke: #cf222e; stroke-width: 1.6; stroke-dasharray: 5 3; }
.traindoc-timeline .mark { stroke: #ffffff; stroke-width: 1.2; }
.traindoc-timeline .first-failure { fill: #cf222e; }
.traindoc-timeline .failure { fill: #bc4c00; }
.traindoc-timeline .consequence { fill: #8c959f; }
.traindoc-timeline .symptom { fill: #9a6700; }
.traindoc-timeline .mark.untimed { fill-opacity: 0; stroke-width: 2; }
.traindoc-timeline .mark.untimed.first-failure { stroke: #cf222e; }
.traindoc-timeline .mark.untimed.failure { stroke: #bc4c00; }
.traindoc-timeline .mark.untimed.consequence { stroke: #8c959f; }
.traindoc-timeline .mark.untimed.symptom { stroke: #9a6700; }
.traindoc-timeline text.first-failure-label { fill: #cf222e; font-weight: 700; }
.traindoc-timeline .absent-ring { fill: none; stroke: #59636e; stroke-width: 1.6; }
@media (prefers-color-scheme: dark) {
  .traindoc-timeline .bg { fill: #0d1117; }
  .traindoc-timeline .fg { fill: #e6edf3; }
  .traindoc-timeline .muted { fill: #9198a1; }
  .traindoc-timeline .lane-bg { fill: #161b22; }
  .traindoc-timeline .rule { stroke: #3d444d; }
  .traindoc-timeline .hatch-line { stroke: #656c76; }
  .traindoc-timeline .after-first-failure { fill: #6e7681; fill-opacity: 0.28; }
  .traindoc-timeline .first-failure-line { stroke: #ff7b72; }
  .traindoc-timeline .mark { stroke: #0d1117; }
  .traindoc-timeline .first-failure { fill: #ff7b72; }
  .traindoc-timeline .failure { fill: #f0883e; }
  .traindoc-timeline .consequence { fill: #8b949e; }
  .traindoc-timeline .symptom { fill: #d29922; }
  .traindoc-timeline .mark.untimed.first-failure { stroke: #ff7b72; }
  .traindoc-timeline .mark.untimed.failure { stroke: #f0883e; }
  .traindoc-timeline .mark.untimed.consequence { stroke: #8b949e; }
  .traindoc-timeline .mark.untimed.symptom { stroke: #d29922; }
  .traindoc-timeline text.first-failure-label { fill: #ff7b72; }
  .traindoc-timeline .absent-ring { stroke: #9198a1; }
}
"""


def timeline_svg(picture: JobPicture, lang: Lang = "en") -> str:
    """The picture of a triaged job (``jobs.picture.lanes.picture_of``) as an SVG document, its words in ``lang``."""
    body: list[str] = []
    y: float = PAD
    title = _title(picture, lang)
    body.append(_text(PAD, y + FONT["title"], title, "fg title", FONT["title"], weight=700))
    y += FONT["title"] + 8
    subtitle = _subtitle(picture, lang)
    for line in _wrap(subtitle, WIDTH - 2 * PAD, FONT["sub"], 2):
        body.append(_text(PAD, y + FONT["sub"], line, "fg subtitle", FONT["sub"]))
        y += LINE_H
    y += 4
    flag_y = y + FONT["tick"]
    y += LINE_H + 2
    lanes_top = y
    backgrounds, groups = [], []
    for node, lanes in _nodes(picture):
        group = [f'<g class="node" data-node={_attr(node or "")}>']
        if lanes[0].rank is not None and (node is not None or len(picture.nodes) > 1):
            group.append(_text(PAD, y + FONT["node"] + 2, _shown(node) if node else say("picture.node.unknown", lang),
                               "fg node-label", FONT["node"], weight=700))
            group.append(f'<line class="rule" x1="{PAD}" x2="{X1}" y1="{y + NODE_H - 0.5}" y2="{y + NODE_H - 0.5}"/>')
            y += NODE_H
        for index, lane in enumerate(lanes):
            if index % 2 == 0:
                backgrounds.append(f'<rect class="lane-bg" x="{PAD}" y="{y + 1}" width="{X1 - PAD}" height="{LANE_H - 2}"/>')
            group.append(_lane(picture, lane, y, lang))
            y += LANE_H
        group.append("</g>")
        groups.append("".join(group))
    lanes_bottom = y
    overlay = []
    if picture.first_at is not None or picture.first_rank is not None:
        if picture.first_at is not None:
            x = _x(picture, picture.first_at)
            overlay.append(f'<rect class="after-first-failure" x="{x:.1f}" y="{lanes_top}" width="{X1 - x:.1f}" '
                           f'height="{lanes_bottom - lanes_top}"><title>{_esc(say("picture.legend.after", lang))}</title></rect>')
            overlay.append(f'<line class="first-failure-line" x1="{x:.1f}" x2="{x:.1f}" y1="{lanes_top - 4}" '
                           f'y2="{lanes_bottom}"/>')
            label = say("picture.legend.first", lang) + (f" · {_tick(picture.first_at, picture.span)}" if picture.timed else "")
            overlay.append(_anchored(x, flag_y, label, "first-failure-label", FONT["tick"]))
    body += [f'<g class="lane-backgrounds">{"".join(backgrounds)}</g>', *overlay, *groups]
    y += 2
    body.append(f'<line class="rule axis" x1="{X0}" x2="{X1}" y1="{y}" y2="{y}"/>')
    if picture.timed:
        for tick in _ticks(picture.span):
            x = _x(picture, tick)
            body.append(f'<line class="rule" x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + 4}"/>')
            body.append(_anchored(x, y + 4 + FONT["tick"], _tick(tick, picture.span), "muted tick", FONT["tick"]))
        y += 4 + LINE_H
    caption = (say("picture.axis.time", lang, clock=picture.start.strftime("%H:%M:%S"))
               if picture.timed and picture.start is not None else say("picture.axis.order", lang))
    if not picture.marks:
        caption = say("picture.nothing", lang)
    body.append(_text(X0, y + FONT["tick"] + 2, caption, "muted axis-caption", FONT["tick"]))
    y += LINE_H + 8
    legend, y = _legend(picture, y, lang)
    body.append(legend)
    if picture.left_out:
        body.append(_text(PAD, y + FONT["legend"], say("picture.left_out", lang, count=picture.left_out), "muted", FONT["legend"]))
        y += LINE_H
    height = y + PAD
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="traindoc-timeline" viewBox="0 0 {WIDTH} {height}" '
            f'width="100%" style="max-width:{MAX_SHOWN_PX}px;height:auto" role="img" aria-labelledby="tl-title tl-desc" '
            f'data-ranks="{sum(1 for lane in picture.lanes if lane.rank is not None)}" data-nodes="{len(picture.nodes)}" '
            f'data-timed="{str(picture.timed).lower()}">')
    return "".join([head, f'<title id="tl-title">{_esc(title)}</title><desc id="tl-desc">{_esc(subtitle)}</desc>',
                    f"<style>{STYLE}</style>", _defs(), f'<rect class="bg" x="0" y="0" width="{WIDTH}" height="{height}"/>',
                    *body, "</svg>\n"])


# -- pieces ---------------------------------------------------------------------------------------------------------

def _nodes(picture: JobPicture) -> list[tuple[str | None, list[Lane]]]:
    """The lanes by node, in the order drawn; the launcher's lane is a group of its own (no header)."""
    groups: list[tuple[str | None, list[Lane]]] = []
    for lane in picture.lanes:
        if groups and groups[-1][0] == lane.node and (lane.rank is None) == (groups[-1][1][-1].rank is None):
            groups[-1][1].append(lane)
        else:
            groups.append((lane.node, [lane]))
    return groups


def _lane(picture: JobPicture, lane: Lane, y: float, lang: Lang) -> str:
    classes = ["lane"] + (["first-failure"] if lane.first else []) + (["absent"] if lane.absent else []) + \
        ([] if lane.logged else ["no-log"]) + (["launcher"] if lane.rank is None else [])
    who = say("jobs.rank", lang, rank=lane.rank) if lane.rank is not None else say("picture.launcher", lang)
    notes = []
    if lane.first and picture.first_rank is not None:
        notes.append(say("picture.first", lang, who=who))
    if lane.absent:
        notes.append(say("picture.absent_from", lang, who=who, collective=_shown(picture.collective or "")
                         or say("picture.legend.absent", lang)))
    if not lane.logged:
        notes.append(say("picture.no_log", lang, who=who))
    parts = [f'<g class={_attr(" ".join(classes))} data-rank="{"" if lane.rank is None else lane.rank}" '
             f'data-node={_attr(lane.node or "")}>']
    if lane.absent:
        parts.append(f'<rect class="absent-hatch" x="{X0}" y="{y + 1}" width="{X1 - X0}" height="{LANE_H - 2}" '
                     f'fill="url(#tl-hatch)"/>')
    middle = y + LANE_H / 2
    glyph_x = PAD + 7
    if lane.first:
        parts.append(_diamond(glyph_x, middle, 6, "first-failure lane-glyph"))
    elif lane.absent:
        parts.append(f'<circle class="absent-ring lane-glyph" cx="{glyph_x}" cy="{middle}" r="4.5"/>')
    weight = 700 if lane.first else 400
    label_class = "lane-label " + ("first-failure-label" if lane.first else "fg" if lane.logged else "muted")
    parts.append(_text(PAD + 16, middle + FONT["label"] * 0.35, who, label_class, FONT["label"], weight=weight,
                       tooltip=" · ".join(notes)))
    for mark in sorted((m for m in picture.marks if m.rank == lane.rank), key=lambda m: DRAW_ORDER[m.role]):
        parts.append(_mark(picture, mark, middle, who, lang))
    parts.append("</g>")
    return "".join(parts)


def _mark(picture: JobPicture, mark: Mark, middle: float, who: str, lang: Lang) -> str:
    x = _x(picture, mark.at)
    untimed = picture.timed and mark.when is None
    classes = f"mark {MARK_CLASS[mark.role]}" + (" untimed" if untimed else "")
    said = [who]
    if mark.when is not None:
        said.append(("" if mark.exact else "≈ ") + mark.when.strftime("%H:%M:%S.%f")[:-3])
    elif picture.timed:
        said.append(say("picture.no_time", lang))
    said.append(f"{mark.category}: {_shown(mark.line)}")
    if mark.repeats > 1:
        said.append(say("picture.repeats", lang, count=mark.repeats))
    tooltip = f"<title>{_esc(' · '.join(said))}</title>"
    data = (f'data-rank="{"" if mark.rank is None else mark.rank}" data-category={_attr(mark.category)} '
            f'data-at="{mark.at:g}"')
    if mark.role == "first":
        return _diamond(x, middle, MARK_R["first"], classes, data, tooltip)
    return f'<circle class="{classes}" {data} cx="{x:.1f}" cy="{middle}" r="{MARK_R[mark.role]}">{tooltip}</circle>'


def _legend(picture: JobPicture, y: float, lang: Lang) -> tuple[str, float]:
    """The kinds of mark the picture holds, flowed into rows that fit its width."""
    roles = {m.role for m in picture.marks}
    items: list[tuple[str, str]] = []
    for role, key in (("first", "picture.legend.first"), ("failure", "picture.legend.failure"),
                      ("consequence", "picture.legend.consequence"), ("symptom", "picture.legend.symptom")):
        if role in roles:
            glyph = "" if role == "first" else f'<circle class="{MARK_CLASS[role]}" cx="{{x}}" cy="{{y}}" r="5"/>'
            items.append((glyph or "diamond", say(key, lang)))
    if picture.first_at is not None:
        items.append(('<rect class="after-first-failure rule" x="{x0}" y="{y0}" width="12" height="12"/>',
                      say("picture.legend.after", lang)))
    if picture.absent:
        items.append(('<rect class="rule" x="{x0}" y="{y0}" width="12" height="12" fill="url(#tl-hatch)"/>',
                      say("picture.legend.absent", lang)))
    parts, x = ['<g class="legend">'], float(PAD)
    row_y = y
    for glyph, words in items:
        width = 18 + _width(words, FONT["legend"]) + 16
        if x > PAD and x + width > WIDTH - PAD:
            x, row_y = float(PAD), row_y + LINE_H + 2
        cx, cy = x + 6, row_y + FONT["legend"] * 0.65
        if glyph == "diamond":
            parts.append(_diamond(cx, cy, 6, "first-failure"))
        else:
            parts.append(glyph.format(x=cx, y=cy, x0=cx - 6, y0=cy - 6))
        parts.append(_text(x + 16, row_y + FONT["legend"], words, "fg legend-label", FONT["legend"]))
        x += width
    parts.append("</g>")
    return "".join(parts), (row_y + LINE_H + 4 if items else y)


def _defs() -> str:
    return ('<defs><pattern id="tl-hatch" width="7" height="7" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><line class="hatch-line" x1="0" y1="0" x2="0" y2="7"/></pattern></defs>')


def _title(picture: JobPicture, lang: Lang) -> str:
    ranks = sum(1 for lane in picture.lanes if lane.rank is not None) + picture.left_out
    named = [node for node in picture.nodes if node is not None]
    if len(named) > 1 or (named and None in picture.nodes):
        return say("picture.title", lang, ranks=ranks, nodes=len(picture.nodes))
    return say("picture.title.one_node" if named else "picture.title.ranks", lang, ranks=ranks)


def _subtitle(picture: JobPicture, lang: Lang) -> str:
    first = next((m for m in picture.marks if m.role == "first"), None)
    if picture.first_rank is None and first is None:
        return say("picture.no_first", lang)
    who = say("jobs.rank", lang, rank=picture.first_rank) if picture.first_rank is not None else \
        say("picture.launcher", lang)
    if first is None:
        return say("picture.waited_for", lang, who=who)
    return f"{say('picture.first', lang, who=who)}: {_shown(first.line)}"


def _x(picture: JobPicture, at: float) -> float:
    if picture.span <= 0:
        return X0 + INSET
    return X0 + INSET + (X1 - X0 - 2 * INSET) * min(max(at / picture.span, 0.0), 1.0)


def _ticks(span: float) -> list[float]:
    if span <= 0:
        return [0.0]
    step = next((s for s in STEPS if span / s <= MAX_TICKS), STEPS[-1] * math.ceil(span / STEPS[-1] / MAX_TICKS))
    return [i * step for i in range(int(span // step) + 1)]


def _tick(seconds: float, span: float) -> str:
    """0s, 0.5s, 45s, 1m30s, 2h05m: short enough for five ticks at 400 px."""
    if span < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes}m{rest:02d}s" if rest else f"{minutes}m"
    hours, rest = divmod(whole // 60, 60)
    return f"{hours}h{rest:02d}m" if rest else f"{hours}h"


def _diamond(x: float, y: float, r: float, classes: str, data: str = "", inner: str = "") -> str:
    points = f"{x:.1f},{y - r:.1f} {x + r:.1f},{y:.1f} {x:.1f},{y + r:.1f} {x - r:.1f},{y:.1f}"
    return f'<polygon class="{classes}" {data} points="{points}">{inner}</polygon>'


def _text(x: float, y: float, words: str, classes: str, size: float, *, weight: int = 400, tooltip: str = "") -> str:
    bold = ' font-weight="700"' if weight >= 700 else ""
    inner = _esc(words) + (f"<title>{_esc(tooltip)}</title>" if tooltip else "")
    return f'<text class="{classes}" x="{x:.1f}" y="{y:.1f}" font-size="{size}"{bold}>{inner}</text>'


def _anchored(x: float, y: float, words: str, classes: str, size: float) -> str:
    """Text centred on ``x``, moved in so that it stays inside the picture."""
    half = _width(words, size) / 2
    centre = min(max(x, PAD + half), WIDTH - PAD - half)
    return (f'<text class="{classes}" x="{centre:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="middle">'
            f"{_esc(words)}</text>")


def _width(words: str, size: float) -> float:
    """About how wide ``words`` are drawn: a wide (CJK) character a full em, others a little over half."""
    return sum(size if unicodedata.east_asian_width(c) in "WF" else size * 0.58 for c in words)


def _wrap(words: str, width: float, size: float, most: int) -> list[str]:
    """``words`` in at most ``most`` lines of ``width``, the last one cut with "…"."""
    lines: list[str] = []
    line = ""
    for word in re.split(r"(?<=\s)", words):
        if _width(line + word, size) <= width or not line:
            line += word
            continue
        lines.append(line.rstrip())
        line = word
    lines.append(line.rstrip())
    if len(lines) > most:
        lines = lines[:most]
        lines[-1] = lines[-1].rstrip() + "…"
    fitted = []
    for text in lines:
        while _width(text, size) > width and len(text) > 1:
            text = text[:-2] + "…"
        fitted.append(text)
    return fitted


def _shown(text: str) -> str:
    """A text from a log as the picture may show it: secrets masked, invisible characters shown."""
    return printable(mask(text))


def _esc(text: str) -> str:
    return _html_escape(NOT_XML.sub("\ufffd", text), quote=False)


def _attr(text: str) -> str:
    value = _html_escape(NOT_XML.sub("\ufffd", printable(mask(text))), quote=True)
    return '"' + value.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;") + '"'
