"""The console every command prints to (paths never wrap mid-line when the output is not a terminal)."""
from __future__ import annotations

import sys

from rich.console import Console

console = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=True)
