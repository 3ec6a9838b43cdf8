"""The console every command prints to (paths never wrap mid-line when the output is not a terminal)."""
from __future__ import annotations

import sys

from rich.console import Console

console = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=True)


def print_problems(warnings, count: int, examples, what: str) -> None:
    """A reader's warnings, then how many rows it could not read (``what`` happened to them) with examples."""
    from rich.markup import escape

    for w in warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    if count:
        console.print(f"[yellow]{count} {what}[/], e.g.:")
        for e in examples:
            console.print(f"  {escape(e)}")
