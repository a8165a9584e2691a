"""TeX in titles, author names, abstracts and a model's texts, as the letters it means.

Every renderer shows a paper's text through here, once, in the pure render layer (the view,
`bot.render.text`'s author filters, the terminal): the store keeps the text as the source
published it, TeX and all, and the matcher reads that (folding `\\"o` and ö alike), so its
spans are offsets into the text as written; `letters_segments` carries them over to the
text as shown.

- `letters`: a text as shown (`Schr\\"odinger` -> Schrödinger, `$\\alpha$` -> α);
- `letters_segments`: the same, cut into highlighted segments by the matcher's spans;
- `tex_math`: the inside of one `$...$` as Unicode, or None (see `bot.render.tex.math`).

Anything not understood stays as written, so no text is ever lost.
"""

from __future__ import annotations

from bot.render.tex.letters import Piece, Segment, formulas, letters, letters_segments, pieces
from bot.render.tex.math import MATH_RE, tex_math

__all__ = [
    "MATH_RE",
    "Piece",
    "Segment",
    "formulas",
    "letters",
    "letters_segments",
    "pieces",
    "tex_math",
]
