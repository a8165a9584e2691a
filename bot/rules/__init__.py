"""The rule language: parse a subscriber's rule, format it back, evaluate it on a paper.

Pure: no I/O, no clock, no logging setup. `parse_rule` turns text into an explicit tree
(`Rule` > `Or` | `And` | `Not` | `Term` | `Author` | `Category` | `Id` | `Source` |
`Upvotes` | `Trending`); `format_rule` writes its canonical text; `match`
(= `evaluate(rule.node, text)`, the reference evaluator) walks the tree over a `PaperText`,
one paper's words, authors, categories, id, sources and Hugging Face upvotes and rank, read
once by `analyze` and reused for every rule. Errors are `RuleError`s a person can act on,
pointing at a column of the (stripped) rule. The same grammar serves the config file, the
Slack command and the web page.

Modules: `words` (tokenize, fold, name_words), `tree` (the nodes, format_rule),
`parser` (parse_rule), `evaluation` (PaperText, analyze, evaluate, match), `prose` (a
rule in words for a reader: describe, describe_rule).

Grammar (version 2), EBNF::

    rule        = alternative { "OR" alternative } ;
    alternative = unary { [ "AND" ] unary } ;                 AND may be left out
    unary       = [ "NOT" | "-" ] primary ;                   "-" touches what it excludes
    primary     = "(" rule ")" | field | top | upvotes | phrase | word ;
    field       = name ":" ( word | phrase | "(" rule ")" ) ;  nothing between ":" and value
    name        = "ti" | "abs" | "au" | "cat" | "id" | "src" ;  in any case
    top         = "hf:top" digits ;                           in any case; 1 to 100
    upvotes     = "upvotes" [ ":" ] comparison digits ;       one word: no spaces; any case
    comparison  = ">=" | ">" | "<=" | "<" | "=" ;
    digits      = digit { digit } ;                           0-9, or any script's digits
    phrase      = quote { character - quote } quote ;         quote = '"' | '“' | '”' | '„'
    word        = { character - ( space | quote | "(" | ")" | "|" ) } ;  but not OR AND NOT

    At most 500 characters (also written out in full: `ti:(a OR b)` is `ti:a OR ti:b`),
    32 terms (leaves, excluded ones included), parentheses 10 deep; no control character
    (C0 but tab and line breaks, DEL, C1, lone surrogates, bidi overrides).
    Inside `name:( ... )` the field applies to every word and phrase; no other field there,
    nor `hf:` or `upvotes`. `hf:` and `upvotes:` take no group. A word (not a field's
    value: `ti:upvotes>=20` is text) that starts with `upvotes` and one of `< > = ! ≥ ≤` is
    a comparison or an error, never text; `upvote>=20`, `votes>=20` and `upvotes >= 20` are
    errors that say what to write. Quote it to search the text: `"upvotes>=20"`.

Operators are UPPER CASE (`or`, `and`, `not` are words). NOT and `-` bind tightest, then
AND (written or implicit), then OR, as in arXiv search and mail filters:
`a b OR c -d` is `(a AND b) OR (c AND NOT d)`. NOT cannot negate a NOT (`NOT NOT x`,
`--x`, `-(-x)` are errors).

What each part matches:

* a word or phrase: in the title or the abstract, case-insensitively, on whole words.
  Hyphens and punctuation break words on both sides, so `multi-agent` is the phrase
  `multi agent` and matches "multi-agent", "Multi Agent", "multi–agent" (not
  "multiagent"); `rl` does not match "control". Singular and plural forms match each
  other (`fold`: `policy` ~ "policies", not a stemmer); accents fold in the rule and the
  text, TeX accents in the text too (`Schrödinger` ~ "Schrodinger" ~ `Schr\\"odinger`).
* `word*`: a prefix wildcard, at the end of a word (or of a phrase's last word:
  `"language model*"`), after at least 3 letters. The prefix is lower-cased and accent
  folded but NOT plural folded; it matches a text word whose folded form or whose
  lower-case, accent-folded unfolded form starts with it: `transform*` ~ "transformers",
  "transformation"; `studi*` ~ "studies"; `studies*` does not match "study".
* `ti:` the title only, `abs:` the abstract only (a word, a "phrase" or a group:
  `ti:(diffusion OR flow)`, `abs:"point cloud*"`).
* `au:` an author, from the paper's author list. The rule's last word is the surname:
  an author matches when their last name word equals it, and every other word of the
  rule (given names, initials, particles) is found among the author's other name words,
  in order, each equal or an initial of the other (`y` ~ `yann`); the paper may write more
  words than the rule (middle names, initials). So `au:lecun` is any LeCun;
  `au:"Yann LeCun"` matches "Yann LeCun", "Y. LeCun", "Yann A. LeCun", "LeCun, Yann" (a
  comma puts the surname first, in the rule too), not "Yann Smith" nor "Yves LeCun";
  `au:"Yann A. LeCun"` needs the A (write less to match more). An author written with no
  given name matches only a surname rule. Names fold case and accents, never plurals
  (`au:"Rene Vidal"` = "René Vidal" = `Ren\\'e Vidal`); affiliations in parentheses are
  ignored ("Jane Doe (MIT)"); a final Jr, Sr, II, III, IV is dropped; an apostrophe between
  letters joins (`au:obrien` = "O'Brien"); hyphens and dots split ("Jean-Pierre" is two
  given names, "J.-P." two initials). Compound surnames: the last word is the surname, the
  particles before it are matched like given names: `au:"Del Maestro"` and
  `au:"van der Waals"` need those words, `au:maestro` finds every Maestro and Del Maestro;
  a hyphenated surname is found by its last part or in full (`au:jones`,
  `au:"Smith-Jones"`).
* `cat:cs.RO` a paper listed in cs.RO (primary or cross-list); `cat:cs` (= `cat:cs.*`)
  any category of the archive. Case does not matter; the canonical spelling is arXiv's.
* `id:2411.17700` one paper by its arXiv id; a version (`v2`) and an `arXiv:` prefix are
  ignored; old style `id:quant-ph/0201082` (`math.GT/0309136` = `math/0309136`). Digits
  of any script are read as 0-9 (`id:٢٤١١.١٧٧٠٠` is `id:2411.17700`), in counts too.
* `src:huggingface` a paper one of whose sources has that configured name or kind
  (`Paper.sources`, and `Paper.source`): `src:hf-daily` (a name), `src:huggingface`,
  `src:arxiv`, `src:feed`, `src:arxiv_query` (kinds). A name is letters, digits, `-`, `_`
  and `.`; case does not matter (canonical: lower case). Names and kinds are compared
  whole: `src:arxiv` is not `src:arxiv-cs`.
* `upvotes>=20` (also `>`, `<=`, `<`, `=`; `upvotes:>=20` is the same) a paper on Hugging
  Face Daily Papers with that many upvotes. A paper not on Hugging Face (no upvotes) matches
  no comparison, not even `upvotes<5`; so `-upvotes>=5` keeps it. `upvotes:20` is an error
  (write `upvotes>=20` or `upvotes=20`), and so are `upvotes >= 20`, `upvotes=>3`.
* `hf:top10` a paper among the 10 most upvoted of its Hugging Face day (its rank, 1 the
  most upvoted, is at most 10); any N from 1 to 100. No other `hf:` value (`hf:trending`
  is an error that suggests `hf:top10`).
* `-x` and `NOT x` exclude. A rule must have a positive requirement (`is_positive`):
  a rule of exclusions only (`-survey`, `NOT robot`) is refused, and so is a rule with ANY
  OR alternative made of exclusions only (`robot OR -survey`, `a OR (-b -c)`), because
  it would match almost every paper. `robot (a OR -b)` is fine: robot is required.

Hits (for highlighting and ranking): every positive leaf that matched, in the order of
the tree; a term gives `Hit("title"|"abstract", start, end, term)` spans into the original
text (title hits first, then abstract hits, each in text order); `au:` gives
`Hit("author", i, i, term)`, i an index into `Paper.authors`; `cat:` and `id:` give one
`Hit("category"|"id", 0, 0, term)`, `src:`, `upvotes` and `hf:` one
`Hit("source"|"upvotes"|"trending", 0, 0, term)`. OR reports the hits of every
alternative that matched; nothing under a NOT is reported. `term` is the leaf's canonical
text (`robot`, `ti:"a b"`, `au:lecun`, `cat:cs.RO`, `src:hf-daily`, `upvotes>=20`,
`hf:top10`).

Words (`tokenize`, the same for rules and papers): a word is a run of letters and digits;
TeX accent commands (`\\"o`, `\\'{e}`, `{\\l}`, `\\ss`) and grouping braces stay inside
it; any other TeX command is a word of its own (`$\\alpha$` -> alpha) unless it takes an
argument (`\\emph{`). A possessive 's is dropped. Phrase words must be adjacent;
punctuation between them does not count.

Examples::

    "diffusion policy" manipulation             both, in title or abstract
    multi-agent "reinforcement learning" -survey
    ti:(diffusion OR flow) robot*               diffusion or flow in the title; robot... anywhere
    au:lecun OR au:"Yoshua Bengio"              papers by either
    cat:cs.RO (grasping OR manipulation)        either word, in papers listed in cs.RO
    cat:astro-ph.CO -cat:hep-th                 every cosmology paper not also in hep-th
    id:2411.17700                               that paper
    src:huggingface upvotes>=20                 Hugging Face papers with 20 upvotes or more
    hf:top5 OR (cat:cs.RO src:huggingface)      the day's top 5, and robotics on Hugging Face
    "diffusion policy" -src:arxiv               the phrase, in papers not from arXiv

Things newcomers get wrong:

* `a b OR c` is `(a b) OR c`, not `a (b OR c)`: write the parentheses you mean.
* `neural network` is two words, each anywhere; quote the phrase: `"neural network"`.
* `au:Yann LeCun` is `au:yann` AND the word lecun; quote the name: `au:"Yann LeCun"`.
* `robot or drone` needs the three words robot, or, drone: operators are upper case.
* `ti: robot` and `- survey` are errors: nothing goes between `ti:` or `-` and its term.
* `learn` does not match "learning"; `learn*` does (and "learner", "learned"...).
* `au:garcia` does not find "Gabriel García Márquez": the surname is the last word
  (`au:marquez`, `au:"Garcia Marquez"`).
* `cat:cs` does not include eess or stat; `cat:math` does not include math-ph.
* `upvotes:20` is an error: write `upvotes>=20` (at least) or `upvotes=20` (exactly).
* `upvotes<5` does not match papers that are not on Hugging Face at all.
"""

from __future__ import annotations

from bot.rules.evaluation import (
    PaperText,
    analyze,
    analyze_text,
    evaluate,
    holds,
    leaf_hits,
    match,
    matches_any,
)
from bot.rules.parser import MAX_DEPTH, MAX_RULE_LENGTH, MAX_TERMS, arxiv_id, parse_rule
from bot.rules.prose import describe, describe_rule
from bot.rules.tree import (
    LEAVES,
    And,
    Author,
    Category,
    Id,
    Leaf,
    Node,
    Not,
    Or,
    Rule,
    Source,
    Term,
    Trending,
    Upvotes,
    format_node,
    format_rule,
    is_positive,
    leaf_text,
)
from bot.rules.words import Token, fold, name_words, prefix_form, tokenize

__all__ = [
    "LEAVES",
    "MAX_DEPTH",
    "MAX_RULE_LENGTH",
    "MAX_TERMS",
    "And",
    "Author",
    "Category",
    "Id",
    "Leaf",
    "Node",
    "Not",
    "Or",
    "PaperText",
    "Rule",
    "Source",
    "Term",
    "Token",
    "Trending",
    "Upvotes",
    "analyze",
    "analyze_text",
    "arxiv_id",
    "describe",
    "describe_rule",
    "evaluate",
    "fold",
    "format_node",
    "format_rule",
    "holds",
    "is_positive",
    "leaf_hits",
    "leaf_text",
    "match",
    "matches_any",
    "name_words",
    "parse_rule",
    "prefix_form",
    "tokenize",
]
