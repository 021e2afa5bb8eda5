"""Markdown rendering of the report (GitHub-flavoured tables; figures linked as SVG files)."""

from __future__ import annotations

from typing import Callable

from .doc import Document, Figure, ListBlock, Paragraph, Section, Table


def _cell(s: str) -> str:
    return str(s).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table_md(t: Table) -> str:
    out = [f"**{t.title}**", ""]
    out.append("| " + " | ".join(_cell(c.header) for c in t.columns) + " |")
    out.append("|" + "|".join("---:" if c.numeric else "---" for c in t.columns) + "|")
    for row in t.rows:
        cells = []
        for c in row:
            txt = _cell(c.text)
            cells.append(f"**{txt}**" if c.cls == "best" and txt else txt)
        out.append("| " + " | ".join(cells) + " |")
    if t.note:
        out += ["", f"_{t.note}_"]
    return "\n".join(out)


def section_md(s: Section, level: int, figure_link: Callable[[Figure], str | None] | None = None) -> str:
    out = [f"{'#' * min(level, 6)} {s.title}"]
    for b in s.blocks:
        if isinstance(b, Paragraph):
            out.append(f"_{b.text}_" if b.cls == "note" else b.text)
        elif isinstance(b, ListBlock):
            out.append("\n".join(f"{i + 1}. {x}" if b.ordered else f"- {x}" for i, x in enumerate(b.items)))
        elif isinstance(b, Table):
            out.append(table_md(b))
        elif isinstance(b, Figure):
            link = figure_link(b) if figure_link else None
            fig = f"![{b.title}]({link})\n\n" if link else f"**Figure: {b.title}**\n\n"
            out.append(fig + f"_{b.caption}_")
        elif isinstance(b, Section):
            out.append(section_md(b, level + 1, figure_link))
    return "\n\n".join(out)


def render_markdown(doc: Document, figure_link: Callable[[Figure], str | None] | None = None) -> str:
    out = [f"# {doc.title}", doc.subtitle]
    if doc.answer:
        out.append(section_md(doc.answer, 2, figure_link))
    out.append("\n".join(f"- {k}: {v}" for k, v in doc.meta))
    out += [section_md(s, 2, figure_link) for s in doc.sections]
    return "\n\n".join(out).rstrip() + "\n"
