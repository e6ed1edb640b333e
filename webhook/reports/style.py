"""Terminal styling for the text reports: bold and colour when the output is a terminal."""

from __future__ import annotations

import click


class Style:
    def __init__(self, colour: bool) -> None:
        self._on = colour

    def bold(self, text: str) -> str:
        return click.style(text, bold=True) if self._on else text

    def colour(self, text: str, fg: str) -> str:
        return click.style(text, fg=fg, bold=True) if self._on else text
