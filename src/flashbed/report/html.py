"""Self-contained HTML: inline CSS, inline SVG figures, a small inline script that sorts tables.

No external resource of any kind (a Content-Security-Policy forbids them), so the page
opens offline and shows the same everywhere.
"""

from __future__ import annotations

import html
import re

from .doc import Document, Figure, ListBlock, Paragraph, Section, Table

CSS = """
:root { --fg: #1b1f24; --muted: #5a6270; --line: #d8dde3; --bad: #b2182b; --best: #0b6e2f; --bg2: #f5f7f9; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif; color: var(--fg);
       margin: 0; background: #fff; }
header.top { padding: .8rem 2rem .6rem; border-bottom: 1px solid var(--line); background: var(--bg2); }
header.top h1 { margin: 0 0 .1rem; font-size: 1.45rem; }
header.top p.sub { margin: 0; color: var(--muted); }
section.answer { margin: 0; padding: .4rem 2rem .6rem; border-bottom: 1px solid var(--line); max-width: 1300px; }
section.answer h2 { margin: .2rem 0 .2rem; border: 0; padding: 0; font-size: 1.2rem; }
section.answer p { margin: .35rem 0 .1rem; }
section.answer ul { margin: 0 0 .3rem; padding-left: 1.2rem; }
section.answer li { margin: .12rem 0; }
section.answer code { font-size: .85em; }
div.meta { padding: .6rem 2rem; border-bottom: 1px solid var(--line); }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: 0; font-size: .9rem; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; }
nav.toc { padding: .6rem 2rem; border-bottom: 1px solid var(--line); font-size: .9rem; }
nav.toc > ul { margin: 0; padding-left: 1.2rem; columns: 2; } nav.toc ul ul { margin: 0; padding-left: 1rem; }
nav.toc li { break-inside: avoid; }
main { padding: 0 2rem 3rem; max-width: 1200px; }
section { margin-top: 1.2rem; }
h2 { border-bottom: 2px solid var(--line); padding-bottom: .2rem; margin-top: 2rem; }
h3 { margin-top: 1.6rem; } h4 { margin: 1.2rem 0 .4rem; }
p.note { color: var(--muted); } p.missing { color: var(--bad); }
ol.ranking li, ul li { margin: .25rem 0; }
code { background: var(--bg2); padding: 0 .25em; border-radius: 3px; font-size: .92em; }
figure { margin: 1.2rem 0; padding: .5rem; border: 1px solid var(--line); border-radius: 6px; overflow-x: auto; }
figure svg { display: block; max-width: 100%; height: auto; }
div.compact > figure { margin: .3rem 0 .2rem; padding: 0; border: 0; }
figcaption { font-size: .85rem; color: var(--muted); margin-bottom: .3rem; }
figcaption strong { color: var(--fg); font-size: .95rem; }
.tablewrap { overflow-x: auto; margin: 1rem 0; }
table { border-collapse: collapse; font-size: .85rem; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
th, td { border: 1px solid var(--line); padding: .2rem .45rem; vertical-align: top; }
th { background: var(--bg2); cursor: pointer; user-select: none; white-space: nowrap; position: relative; }
th[data-type="num"], td.num { text-align: right; }
th[aria-sort="ascending"]::after { content: " ▲"; font-size: .7em; }
th[aria-sort="descending"]::after { content: " ▼"; font-size: .7em; }
td.best { font-weight: 700; color: var(--best); }
td.bad { color: var(--bad); }
td.missing, td.na { color: var(--muted); }
td.labbound { color: var(--muted); font-style: italic; }
p.tnote { font-size: .8rem; color: var(--muted); margin: .2rem 0 0; }
"""

# sorts a table by the clicked column; numbers by their data-v value, empty values last
JS = """
(function () {
  "use strict";
  function key(td, num) {
    if (!td) { return null; }
    var v = td.getAttribute("data-v");
    if (v === null || v === "") { return null; }
    if (num) { var f = parseFloat(v); return isNaN(f) ? null : f; }
    return v.toLowerCase();
  }
  function sortBy(table, th, col) {
    var num = th.getAttribute("data-type") === "num";
    var asc = th.getAttribute("aria-sort") !== "ascending";
    var heads = table.tHead.rows[0].cells;
    for (var h = 0; h < heads.length; h++) { heads[h].removeAttribute("aria-sort"); }
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var idx = new Map();
    rows.forEach(function (r, i) { idx.set(r, i); });
    rows.sort(function (a, b) {
      var x = key(a.cells[col], num), y = key(b.cells[col], num);
      if (x === null || y === null) {
        if (x === y) { return idx.get(a) - idx.get(b); }
        return x === null ? 1 : -1;
      }
      var c = x < y ? -1 : (x > y ? 1 : 0);
      return (asc ? c : -c) || (idx.get(a) - idx.get(b));
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      th.title = "sort by this column";
      th.addEventListener("click", function () { sortBy(table, th, col); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, th, col); }
      });
    });
  });
  document.documentElement.setAttribute("data-sortable", String(tables.length));
})();
"""

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "font-src 'none'; connect-src 'none'")


def esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def inline(s: str) -> str:
    """Escape, then **bold** and `code`."""
    s = esc(s)
    s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", s)


def _table(t: Table) -> str:
    out = [f'<div class="tablewrap"><table class="sortable" id="{esc(t.id)}">', f"<caption>{esc(t.title)}</caption>",
           "<thead><tr>"]
    for c in t.columns:
        out.append(f'<th scope="col" data-type="{"num" if c.numeric else "text"}">{esc(c.header)}</th>')
    out.append("</tr></thead><tbody>")
    for row in t.rows:
        out.append("<tr>")
        for col, cell in zip(t.columns, row):
            classes = " ".join(x for x in (cell.cls, "num" if col.numeric else "") if x)
            v = cell.sort if cell.sort is not None else ("" if col.numeric else cell.text)
            if isinstance(v, float):
                v = repr(v)
            attrs = f' data-v="{esc(v)}"'
            if classes:
                attrs += f' class="{classes}"'
            if cell.title:
                attrs += f' title="{esc(cell.title)}"'
            out.append(f"<td{attrs}>{esc(cell.text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    if t.note:
        out.append(f'<p class="tnote">{esc(t.note)}</p>')
    out.append("</div>")
    return "\n".join(out)


def _figure(f: Figure) -> str:
    # the provenance (device, kernel, tools, profile, repeats) is written inside the SVG itself
    if f.compact:  # the title as the picture's accessible name, no title bar: the first screen keeps its room
        return (f'<div class="compact" role="img" aria-label="{esc(f.title)}"><figure id="{esc(f.id)}" class="fig">'
                f'\n{f.svg}</figure></div>')
    return (f'<figure id="{esc(f.id)}" class="fig"><figcaption><strong>{esc(f.title)}</strong>'
            f'</figcaption>\n{f.svg}</figure>')


def _section(s: Section, level: int, cls: str = "") -> str:
    h = min(level, 6)
    attrs = f' class="{esc(cls)}"' if cls else ""
    out = [f'<section id="{esc(s.id)}"{attrs}><h{h}>{esc(s.title)}</h{h}>']
    for b in s.blocks:
        if isinstance(b, Paragraph):
            pcls = f' class="{esc(b.cls)}"' if b.cls else ""
            out.append(f"<p{pcls}>{inline(b.text)}</p>")
        elif isinstance(b, ListBlock):
            tag = "ol" if b.ordered else "ul"
            lcls = ' class="ranking"' if b.ordered else ""
            out.append(f"<{tag}{lcls}>" + "".join(f"<li>{inline(i)}</li>" for i in b.items) + f"</{tag}>")
        elif isinstance(b, Table):
            out.append(_table(b))
        elif isinstance(b, Figure):
            out.append(_figure(b))
        elif isinstance(b, Section):
            out.append(_section(b, level + 1))
    out.append("</section>")
    return "\n".join(out)


def render_html(doc: Document) -> str:
    toc = []
    for s in doc.sections:
        subs = "".join(f'<li><a href="#{esc(c.id)}">{esc(c.title)}</a></li>' for c in s.blocks
                       if isinstance(c, Section))
        toc.append(f'<li><a href="#{esc(s.id)}">{esc(s.title)}</a>' + (f"<ul>{subs}</ul>" if subs else "")
                   + "</li>")
    meta = "".join(f"<dt>{esc(k)}</dt><dd>{inline(v)}</dd>" for k, v in doc.meta)
    answer = _section(doc.answer, 2, "answer") if doc.answer else ""
    body = "\n".join(_section(s, 2) for s in doc.sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<link rel="icon" href="data:,">
<title>{esc(doc.title)}</title>
<style>{CSS}</style>
</head>
<body>
<header class="top"><h1>{esc(doc.title)}</h1><p class="sub">{inline(doc.subtitle)}</p></header>
{answer}
<div class="meta"><dl class="meta">{meta}</dl></div>
<nav class="toc" aria-label="contents"><ul>{"".join(toc)}</ul></nav>
<main>
{body}
</main>
<script>{JS}</script>
</body>
</html>
"""
