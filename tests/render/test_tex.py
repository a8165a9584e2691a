"""TeX as letters (`bot.render.tex`): titles, author names, abstracts and a model's texts
show `Schr\\"odinger` as Schrödinger wherever they are shown (email HTML and text, Slack, the
web pages, `paperbell try`), highlights land on the letters and never split TeX, matching
still folds accents, and nothing is ever lost: what is not understood stays as written.

On the real papers of the bundled day (bot/data/demo), and on hostile text: huge, deep,
unbalanced, NUL and odd Unicode (Hypothesis properties, real examples pinned with @example).
"""

from __future__ import annotations

import email
import email.policy
import html
import itertools
import re
import time
import unicodedata
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.demo_mail import NOW, SETTINGS, demo_digests, demo_papers
from support.pages import Site

from bot.core.models import Digest, Paper, Subscriber
from bot.demo import DEMO_DAY, bundled_papers
from bot.match.digest import build_digest, match_rules, try_rule
from bot.render.message import build_message
from bot.render.slack import build_posts
from bot.render.terminal import render_trial
from bot.render.tex import letters, letters_segments, pieces, tex_math
from bot.render.text import excerpt, first_authors, highlight, shorten_authors
from bot.render.view import group_views, model_text
from bot.rules import parse_rule

# The four names of the issue, as the bundled day writes them and as they are shown.
NAMES = {
    'Schr\\"odinger': "Schrödinger",
    "R\\'emy": "Rémy",
    "Vavry\\v{c}uk": "Vavryčuk",
    "Przemys{\\l}aw": "Przemysław",
}
# Rules that find them on the bundled day (accents folded: no rule writes the TeX).
NAME_RULES = ('"schrödinger equation"', "au:remy", "au:vavrycuk", "au:olbratowski")
# Text-mode TeX that should never be left once converted: accents, TeX letters, fonts.
TEXT_TEX = re.compile(
    r"""\\["'`^~=.]|\\[uvHcdbkr]\s*\{|\\(?:l|L|o|O|i|j|ss|aa|AA|ae|AE|oe|OE|dh|th|ng)(?![A-Za-z])"""
    r"|\\(?:text(?:bf|it|rm|sf|tt|sc)|emph|bf|it|em|rm|sc)(?![A-Za-z])|\{\\"
)


def papers_by_id() -> dict[str, Paper]:
    return {paper.id: paper for paper in demo_papers()}


def digest_of(rules: tuple[str, ...], **changes: object) -> Digest:
    """A digest of the bundled day for a subscriber with these rules."""
    subscriber = replace(
        Subscriber(name="tex", email="tex@lab.example", rules=rules, max_papers=50), **changes
    )
    parsed = [parse_rule(rule) for rule in rules]
    papers = demo_papers()
    digest = build_digest(
        subscriber,
        parsed,
        papers,
        delivered={},
        now=NOW,
        since=DEMO_DAY - timedelta(days=6),
        matches=match_rules(parsed, papers),
    )
    assert digest is not None
    return digest


def message_texts(digest: Digest) -> dict[str, str]:
    """The email's text part, its HTML part as the words a reader sees, and the Slack texts."""
    raw = build_message(digest, SETTINGS, now=NOW).as_bytes()
    message = email.message_from_bytes(raw, policy=email.policy.default)
    parts = {
        part.get_content_subtype(): part.get_content()  # type: ignore[attr-defined]
        for part in message.walk()
        if part.get_content_maintype() == "text"
    }
    seen = re.sub(r"<style.*?</style>|<[^>]+>", "", parts["html"], flags=re.DOTALL)
    slack = [text for post in build_posts(digest) for text in _slack_texts(list(post.blocks))]
    return {"text": parts["plain"], "html": html.unescape(seen), "slack": "\n".join(slack)}


def _slack_texts(value: object) -> list[str]:
    if isinstance(value, dict):
        if value.get("type") in ("plain_text", "mrkdwn"):
            return [value["text"]]
        return [text for each in value.values() for text in _slack_texts(each)]
    if isinstance(value, list):
        return [text for each in value for text in _slack_texts(each)]
    return []


# -- real examples ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        *NAMES.items(),
        ("V\\'aclav Vavry\\v{c}uk", "Václav Vavryčuk"),
        ("Serdar Kad{\\i}o\\u{g}lu", "Serdar Kadıoğlu"),
        ("Jaros{\\l}aw \\.Zygierewicz", "Jarosław Żygierewicz"),
        ("Maciej Zi\\k{e}ba", "Maciej Zięba"),
        ("Sofie Castro Holb{\\ae}k", "Sofie Castro Holbæk"),
        ("Rasmus Mar{\\aa}k", "Rasmus Maråk"),
        ("Gu{\\dh}mundur K. Stef\\'ansson", "Guðmundur K. Stefánsson"),
        ("Marta {\\L}uksza", "Marta Łuksza"),
        ("Jeppe Liborius Sj{\\o}rup", "Jeppe Liborius Sjørup"),
        ("Marc Aragon\\`es Fontbot\\'e", "Marc Aragonès Fontboté"),
        ("On an Erd\\H{o}s-Szekeres Game", "On an Erdős-Szekeres Game"),
        ("Informa\\c{c}\\~ao de Fisher", "Informação de Fisher"),
        ("Zden\\v{e}k Frol\\'{\\i}k", "Zdeněk Frolík"),
        ("Friedmann--Lema\\^{\\i}tre--Robertson--Walker", "Friedmann–Lemaître–Robertson–Walker"),
        ("Maru\\v si\\v c and Zhang", "Marušič and Zhang"),
        ("\\textbf{R}easoning", "Reasoning"),
        ("a \\textbf{Hi}gh-level \\textbf{A}utomated", "a High-level Automated"),
        ("DiVincenzo {\\it et al}. put forward", "DiVincenzo et al. put forward"),
        ("{\\Lambda}CDM", "ΛCDM"),
        ("Metastable \\beta-CuGaO2", "Metastable β-CuGaO2"),
        ("360{\\deg} phase", "360° phase"),
        ("Attributes \\& Preferences", "Attributes & Preferences"),
        ("less than 50\\% CPU", "less than 50% CPU"),
        ("$f$", "f"),
        ("$H^3$Fusion: Helpful, Harmless", "H³Fusion: Helpful, Harmless"),
        ("La$_{3}$Ni$_{2}$O$_{7-\\delta}$ thin films", "La₃Ni₂O_{7-δ} thin films"),
        ("$\\mathcal{S}$-Path Packing", "𝒮-Path Packing"),
        ("ergodic integrals for $\\Z^d$-extensions", "ergodic integrals for ℤᵈ-extensions"),
        ("the $\\zeta$-function", "the ζ-function"),
        ("condition number \\(\\kappa^2(\\cdot)\\), defined", "condition number κ²(·), defined"),
        ("we dub ``iterative CBS'' (iCBS)", "we dub “iterative CBS” (iCBS)"),
        ("at \\href{https://github.com/K/E}{here}.", "at https://github.com/K/E (here)."),
        ("at \\url{https://x.org/a_b%20c}", "at https://x.org/a_b%20c"),
        ("add-ons (\\eg, ControlNet)", "add-ons (e.g., ControlNet)"),
        ("Sugaku {\\em Sugaku}", "Sugaku Sugaku"),
        ("results in \\cite{BCPR}. Namely", "results in [BCPR]. Namely"),
        ("(MEGNet~\\cite{Chen2019})", "(MEGNet [Chen2019])"),
        (
            "library\\footnote{\\texttt{https://github.com/J/Cloud\\_Map}}, which",
            "library (https://github.com/J/Cloud_Map), which",
        ),
        ("a basis$\\unicode{x2013}$the Pauli Y basis", "a basis–the Pauli Y basis"),
        ("Let $\\Bbbk$ be a field", "Let 𝕜 be a field"),
        ("the $n^{\\text{th}}$ general", "the nᵗʰ general"),
        ("conjugate $\\overline{\\rm TO}$.", "conjugate T̅O̅."),
        ("where $c=\\coth{\\theta}>1$", "where c=coth θ>1"),
        ("in $O(n\\log n)$ time", "in O(n log n) time"),
        # Not understood, or not TeX: as written.
        ("Re examination of \\b{eta} decay", "Re examination of \\b{eta} decay"),
        ("such as [\\ion{N}{ii}]", "such as [\\ion{N}{ii}]"),
        ("{\\cal O} terms", "{\\cal O} terms"),
        ("Galaxy Mergers at z~2-5", "Galaxy Mergers at z~2-5"),
        ("accounts for ~70% of cases. Next", "accounts for ~70% of cases. Next"),
        ("seeing of 0.5'' at", "seeing of 0.5'' at"),
        ("costs $5 and $10", "costs $5 and $10"),
        ("with \\$5 and \\$10", "with $5 and $10"),
        ("use --flag here", "use --flag here"),
        ('a JSON {"a": 1}', 'a JSON {"a": 1}'),
        ("so \\begin{equation*} E = mc^2 \\end{equation*} holds", "so E = mc² holds"),
        ("a \\begin{equation*} \\left\\{ x \\right. \\end{equation*}", "a { x"),
        ("\\begin{align} a &= b \\\\ c &= d \\end{align}", None),
    ],
)
def test_letters_on_real_examples(written: str, shown: str | None) -> None:
    assert letters(written) == (written if shown is None else shown)


def test_the_four_names_are_in_the_bundled_day_as_tex() -> None:
    """The issue's names are there, written in TeX, so the tests below test something."""
    written = [p.title + " | " + " | ".join(p.authors) for p in bundled_papers()]
    for name in NAMES:
        assert any(name in text for text in written), name


def test_no_text_mode_tex_is_left_in_any_bundled_title_or_author_name() -> None:
    """All 1,504 papers of the bundled day: after conversion, no accent, TeX letter or font
    command is left in a title or an author's name; the only TeX left is \\b{eta} (a typo for
    \\beta: an underbar over three letters, not understood) and the braces of a script with
    no Unicode form in converted math (C^{1+α}, La₃Ni₂O_{7-δ}: true math, kept readable)."""
    papers = bundled_papers()
    assert len(papers) == 1504
    tex = [p for p in papers if re.search(r"[\\$]", p.title + "".join(p.authors))]
    assert len(tex) >= 190
    left = {
        shown
        for paper in papers
        for text in (paper.title, *paper.authors)
        if TEXT_TEX.search(shown := letters(text)) or "$" in shown
    }
    assert left == {"Re examination of \\b{eta} decay in Hg, Pb and Po Isotopes"}
    braces = {
        piece.shown
        for paper in papers
        for text in (paper.title, *paper.authors)
        for piece in pieces(text)
        if "{" in piece.shown
    }
    assert all(piece.startswith("\\b") or "^{" in piece or "_{" in piece for piece in braces)


def test_matching_still_folds_accents_and_the_highlight_lands_on_the_letters() -> None:
    papers = bundled_papers()
    paper = next(p for p in papers if p.id == "2411.17730")
    assert 'Schr\\"odinger' in paper.title
    for rule in ("schrodinger", "schrödinger", "SCHRÖDINGER", "ti:schrodinger"):
        trial = try_rule(parse_rule(rule), papers)
        item = next(item for item in trial.items if item.paper.id == paper.id)
        spans = [(hit.start, hit.end) for hit in item.hits if hit.field == "title"]
        assert ("Schrödinger", True) in highlight(paper.title, spans), rule


def test_a_highlight_never_splits_tex() -> None:
    """`\\textbf{Hi}gh-level`: the matcher's span of `high` runs from inside the command's
    braces to the word's end; shown, it covers exactly `High`, and math a span touches is
    highlighted whole."""
    paper = papers_by_id()["2411.18478"]
    trial = try_rule(parse_rule("high-level OR reasoning OR automated"), [paper])
    spans = [(hit.start, hit.end) for hit in trial.items[0].hits if hit.field == "abstract"]
    segments = highlight(paper.abstract, spans)
    shown = "".join(text for text, _ in segments)
    assert "HiAR-ICL, a High-level Automated Reasoning paradigm in ICL" in shown
    marked = [text for text, hit in segments if hit]
    assert {"High-level", "Automated", "Reasoning"} <= set(marked)
    assert not any("\\" in text or "{" in text or "}" in text for text, _ in segments)
    text = r"With $\alpha$-stable noise on $x_{diffusion}$ and $\beta$."
    crossing = text.index("diffusion}")
    assert highlight(text, [(crossing, crossing + 9)]) == [
        ("With α-stable noise on ", False),
        ("x_diffusion", True),
        (" and β.", False),
    ]


# -- every place a paper is shown -------------------------------------------------------------


def test_a_digest_of_the_bundled_day_shows_the_names_as_letters_in_email_and_slack() -> None:
    digest = digest_of(NAME_RULES)
    assert digest.count >= 4
    for medium, shown in message_texts(digest).items():
        for written, letters_ in NAMES.items():
            assert letters_ in shown, (medium, letters_)
            assert written not in shown, (medium, written)


@pytest.mark.parametrize("name", sorted(demo_digests()))
@pytest.mark.parametrize("abstracts", ["short", "full"])
def test_no_tex_in_the_names_titles_and_excerpts_of_any_demo_digest(
    name: str, abstracts: str
) -> None:
    """What the demo digests show of each paper (title, authors, the abstract's first lines
    and its "Further on" snippet), in the view and in each rendering, holds no TeX."""
    digest = demo_digests()[name]
    digest = replace(digest, subscriber=replace(digest.subscriber, abstracts=abstracts))
    for group in group_views(digest):
        for item in group.items:
            shown = [
                item.title_text,
                shorten_authors(item.paper.authors),
                first_authors(item.paper.authors),
                *(text for text, _ in item.abstract.head + item.abstract.snippet),
            ]
            for text in shown:
                assert not TEXT_TEX.search(text), (item.paper.id, text)
                assert not re.search(r"\$[^$ ]+\$", text), (item.paper.id, text)
    for medium, text in message_texts(digest).items():
        assert not TEXT_TEX.search(text), (name, medium, TEXT_TEX.search(text))


def test_ada_further_on_no_longer_splits_textbf() -> None:
    """The issue's example: ada's digest showed `\\textbf{Hi}gh-level` in a "Further on"
    excerpt with the highlight splitting the TeX; the paper's hit now reads *Reasoning*,
    which its first lines already show, so no snippet is needed for it."""
    texts = message_texts(demo_digests()["ada"])
    assert "\\textbf" not in texts["text"] and "\\textbf" not in texts["html"]
    assert "Beyond Examples: High-level Automated *Reasoning* Paradigm" in texts["text"]


def test_try_shows_the_letters() -> None:
    rule = parse_rule(" OR ".join(NAME_RULES))
    lines = "\n".join(render_trial(try_rule(rule, bundled_papers()), limit=0, width=200))
    for written, shown in NAMES.items():
        assert shown in lines and written not in lines
    assert "*Benjamin Rémy (LEMTA)*" in lines
    assert "*Przemysław Olbratowski*" in lines
    assert "*Schrödinger equation*" in lines


def test_the_manage_page_shows_the_rules_example_titles_as_letters(site: Site) -> None:
    """The one web page that shows papers: a rule's examples on the manage page."""
    site.store.subscribers.add(
        "tex", email="tex@lab.example", rules=['"schrödinger equation"'], now=site.clock()
    )
    site.deliver()  # counts what each rule matched lately
    page = site.http.get(site.link("manage", "tex"))
    assert page.status_code == 200
    (examples,) = re.findall(r'<ol class="examples">(.*?)</ol>', page.text, flags=re.DOTALL)
    titles = [html.unescape(t) for t in re.findall(r"<a [^>]*>(.*?)</a>", examples)]
    assert len(titles) == 3
    assert all("Schrödinger" in title and "\\" not in title for title in titles), titles


def test_a_models_text_shows_its_tex_as_letters() -> None:
    assert model_text('Solves the Schr\\"odinger equation in $O(n^2)$ time.', 200) == (
        "Solves the Schrödinger equation in O(n²) time."
    )


def test_excerpt_never_cuts_inside_a_formula_kept_as_written() -> None:
    text = "word " * 70 + r"\begin{equation} a \foo b c d \end{equation}" + " word" * 40
    cut = excerpt(highlight(text, []), limit=360, slack=10)
    head = "".join(part for part, _ in cut.head)
    assert head.endswith("word") or head.endswith(r"\end{equation}")


# -- TeX math ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tex", "expected"),
    [
        (r"\alpha", "α"),
        (r"O(n^2)", "O(n²)"),
        (r"x^{n+1}", "xⁿ⁺¹"),
        (r"\beta_{BKT}=1.724(2)", "β_BKT=1.724(2)"),
        (r"\mathbb{R}^d", "ℝᵈ"),
        (r"\mathcal{O}(N/{Z_\beta})", "𝒪(N/Z_β)"),
        (r"\sqrt{2}", "√2"),
        (r"\frac{a+b}{2}", "(a+b)/2"),
        (r"p \geq 1", "p ≥ 1"),
        (r"b\to s\ell^+\ell^-", "b→sℓ⁺ℓ⁻"),
        (r"\sim 72\%", "∼72%"),
        (r"5^{\circ}", "5°"),
        (r"\bar{K}", "K̄"),
        (r"M_{\rm vir}", "Mᵥᵢᵣ"),
        (r"\mathrm{d}x", "dx"),
        (r"H_0 D_A = 0.264^{+0.026}", "H₀ D_A = 0.264^{+0.026}"),
        (r"\Z^d", "ℤᵈ"),
        (r"\delta_{\tiny\text{CP}}", "δ_CP"),
        (r"-\text{div}(A\nabla )+ V ", "-div(A∇)+ V"),
        # Not understood: left as TeX (None).
        (r"\unknownmacro x", None),
        (r"\left[V\atop k\right]", None),
        (r"a & b", None),
        (r"\sqrt[3]{x}", None),
        (r"{unbalanced", None),
        (r"5 and ", None),  # "$5 and $10": dollar signs
        ("", None),
    ],
)
def test_tex_math(tex: str, expected: str | None) -> None:
    assert tex_math(tex) == expected


# -- hostile text -----------------------------------------------------------------------------

# TeX's alphabet, and what a feed may hold besides: NUL and other controls, combining marks,
# right-to-left overrides, astral letters, a BOM.
TEX_BITS = [
    "\\", "{", "}", "$", "$$", "^", "_", "~", "-", "--", "`", "'", "%", "&", "#", " ", "\n",
    '\\"', "\\'", "\\v", "\\c", "\\u", "\\l", "\\o", "\\ss", "\\i", "\\(", "\\)", "\\[", "\\]",
    "\\textbf{", "\\emph", "\\it ", "\\url{", "\\href{", "\\frac", "\\sqrt", "\\mathbb{",
    "\\alpha", "\\begin{equation}", "\\end{equation}", "\\foo", "\\\\", "\\{", "\\}", "\\$",
    "\x00", "\x1b", "\u0301", "\u202e", "\ufeff", "\U0001d4aa", "é", "ł", "中", "a", "o", "Z",
]  # fmt: skip
HOSTILE_TEXT = st.lists(st.one_of(st.sampled_from(TEX_BITS), st.text(max_size=5)), max_size=60).map(
    "".join
)
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1)


def _folded(text: str) -> str:
    """Letters as compared: accents dropped, astral math letters (𝒪) made plain."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return plain.translate(str.maketrans("łŁøØıȷßæÆœŒðÐþÞŋŊđĐ", "lLoOijsaAoOdDtTnNdD"))


def _subsequence(needle: str, haystack: str) -> bool:
    letters_left = iter(haystack)
    return all(char in letters_left for char in needle)


@given(HOSTILE_TEXT)
@example('Schr\\"odinger equation with $B_\\infty$ potentials')
@example("Przemys{\\l}aw Olbratowski; Pawe{\\l} Niedbalski")
@example("\\textbf{Hi}gh-level \\textbf{A}utomated \\textbf{R}easoning")
@example("\\href{https://link.springer.com/x}{DiVincenzo {\\it et al}. \\textbf{238}, 379}")
@example("$" + "{" * 3000 + "$")
@example('\x00\\"\x00{\\l\x00}$\x00$\u202e\\v{\u0301}')
def test_letters_never_raise_and_the_segments_are_the_letters(text: str) -> None:
    shown = letters(text)
    assert isinstance(shown, str)
    assert "".join(piece.shown for piece in pieces(text)) == shown
    spans = [(i, i + 3) for i in range(-2, len(text) + 2, 4)]
    assert "".join(part for part, _ in letters_segments(text, spans)) == shown
    covered = [(p.start, p.end) for p in pieces(text)]
    assert covered == sorted(covered)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))
    assert not covered or (covered[0][0] == 0 and covered[-1][1] == len(text))


@given(st.lists(st.one_of(WORD, st.sampled_from(TEX_BITS)), max_size=40))
@example(["\\v", "s", "Maru"])
@example(["$", "\\frac", "word", "$"])
@example(["\\it", "et", "al", "}"])
@example(["\\href{", "url", "}", "{", "here", "}"])
@example(["\\o", "rup"])
@example(["\\foo{", "kept", "}"])
@example(["$", "\\mathbb", "word", "$"])
def test_no_letter_of_a_plain_word_is_lost(parts: list[str]) -> None:
    """Plain words between TeX bits, separated by spaces: every letter of them is shown, in
    order (accented, or a math letter, maybe, but there)."""
    text = " ".join(parts)
    words = "".join(part for part in parts if part.isascii() and part.isalpha())
    assert _subsequence(words, _folded(letters(text)))


@given(st.text(alphabet=st.characters(blacklist_characters="\\{}$-`'")))
def test_text_without_tex_is_shown_as_it_is(text: str) -> None:
    assert letters(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "{" * 100_000 + "x" + "}" * 100_000,
        "{" * 200_000,
        "}" * 200_000,
        "$" + "{" * 200_000 + "$",
        "$a" * 100_000,
        "$$a$" * 50_000,
        "\\( a " * 40_000,
        "\\begin{equation} " * 12_000,
        "\\textbf{" * 25_000 + "x" + "}" * 25_000,
        '\\"o' * 70_000,
        "\\" * 200_000,
        "\\foo{a}" * 30_000,
        "{\\foo " * 30_000 + "}" * 30_000,
        "\\href{a}{" * 25_000 + "}" * 25_000,
        "a--" * 70_000,
        "``a''" * 40_000,
        "$\\alpha$ b " * 20_000,
    ],
    ids=lambda text: f"{text[:12]!r}x{len(text)}",
)
def test_huge_deep_or_unbalanced_text_takes_linear_time(text: str) -> None:
    """Each about 200,000 characters: a second or two on a small machine (a search from
    each formula to the text's end took 270 s on `$a$a$a...`, found while writing this)."""
    # CPU time of this process: a busy machine (or tests run in parallel) does not count.
    started = time.process_time()
    shown = letters(text)
    segments = highlight(text, [(i, i + 4) for i in range(0, len(text), 10)])
    excerpt(segments)
    assert shown
    assert time.process_time() - started < 10
