"""The report as a tree of blocks, rendered by html.py and markdown.py.

Text in Paragraph and ListBlock items may use two inline marks, **bold** and `code`;
everything else is plain text (the renderers escape it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


@dataclass
class Cell:
    text: str
    sort: float | str | None = None  # sort value in the HTML (numbers sort numerically)
    title: str = ""  # tooltip: all repeat values, error text
    cls: str = ""  # "bad" | "good" | "missing" | ""


@dataclass
class Column:
    name: str
    unit: str = ""  # always shown in the header when set
    numeric: bool = True

    @property
    def header(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name


@dataclass
class Table:
    id: str
    title: str
    columns: list[Column]
    rows: list[list[Cell]]
    note: str = ""


@dataclass
class Figure:
    id: str
    title: str
    svg: str
    caption: str  # provenance: device, kernel, tools, profile, repeats
    compact: bool = False  # drawn without its title bar and frame (the first screen's picture)


@dataclass
class Paragraph:
    text: str
    cls: str = ""  # "note" | "missing" | ""


@dataclass
class ListBlock:
    items: list[str]
    ordered: bool = False


@dataclass
class Section:
    id: str
    title: str
    blocks: list["Block"] = field(default_factory=list)

    def add(self, *blocks: "Block") -> "Section":
        self.blocks.extend(blocks)
        return self


Block = Union[Paragraph, ListBlock, Table, Figure, Section]


@dataclass
class Document:
    title: str
    subtitle: str
    meta: list[tuple[str, str]]  # (label, value) shown at the top
    sections: list[Section]
    answer: Section | None = None  # the first screen: the device and the choice per use case

    def walk(self):
        def rec(blocks):
            for b in blocks:
                yield b
                if isinstance(b, Section):
                    yield from rec(b.blocks)
        yield from rec(([self.answer] if self.answer else []) + self.sections)

    def figures(self) -> list[Figure]:
        return [b for b in self.walk() if isinstance(b, Figure)]

    def tables(self) -> list[Table]:
        return [b for b in self.walk() if isinstance(b, Table)]
