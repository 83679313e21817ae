"""Title normalization, tokenization and shingles for near-duplicate and story matching.

Implements the title normalization of dedup Layer 3 (docs/rules.md#layer-3-title-similarity):
lowercase, punctuation stripped, common prefixes removed ("Breaking:", "Update:", "ICYMI:",
"JUST IN:"), wire-service re-issue prefixes ("UPDATE 1-", "REFILE-", "CORRECTED-") and
publisher suffixes (" - Reuters", " | BBC News") too, which make two copies of one story look
different.

Everything here is pure and deterministic (no Python ``hash()``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

from newsflow.text.tokenize import light_stem

__all__ = [
    "STOPWORDS",
    "char_shingles",
    "content_tokens",
    "episode_keys",
    "normalize_title",
    "short_headline",
    "strip_title_affixes",
    "title_dates",
    "title_tokens",
    "url_slug_tokens",
    "word_shingles",
]

# --- prefixes / suffixes -------------------------------------------------------------------

#: Layer 3 title prefixes plus wire-service re-issue tags ("UPDATE 1-", "REFILE-")
#: (docs/rules.md#layer-3-title-similarity).
_PREFIX = re.compile(
    r"^\s*(?:"
    r"(?:breaking(?:\s+news)?|update[sd]?|updated|icymi|just\s+in|developing|exclusive|"
    r"watch|video|live|analysis|opinion|editorial|factbox|timeline|corrected|refile|"
    r"correction|insight|wrapup(?:\s+\d+)?|rpt|urgent|flash|alert)"
    r"(?:\s*\d+)?\s*(?:[:\-\u2013\u2014|]+|\s-\s)"
    r")+\s*",
    re.IGNORECASE,
)
#: "UPDATE 1-", "UPDATE 2-" (Reuters re-issues) — also caught by _PREFIX; kept explicit for readers.
_WIRE_UPDATE = re.compile(r"^\s*update\s*\d+\s*-\s*", re.IGNORECASE)
#: " - Reuters", " | BBC News", " — The Guardian": a short trailing segment after a separator.
_SUFFIX_SEPARATORS = (" - ", " | ", " \u2013 ", " \u2014 ", " :: ")
#: a trailing ellipsis of truncated feed titles ("... show weak trade  ...")
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026)\s*$")
#: words that look like a publisher name in a suffix
_PUBLISHER_HINTS = re.compile(
    r"\b(?:news|times|post|reuters|bbc|cnn|ap|afp|bloomberg|guardian|journal|tribune|herald|"
    r"telegraph|daily|weekly|online|press|today|magazine|mail|star|globe|observer|chronicle|"
    r"gazette|wire|report|radio|tv|network|media|\.com|\.co\.uk|\.org|\.net)\b",
    re.IGNORECASE,
)

_PUNCT_TO_SPACE = re.compile(r"[^\w\s]|_", re.UNICODE)
#: ASCII characters that ``_PUNCT_TO_SPACE`` replaces: punctuation, "_" and control characters
_ASCII_NONWORD_TO_SPACE = {
    c: " " for c in range(128)
    if not chr(c).isalnum() and not chr(c).isspace()
}
_WS = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_APOS_S = re.compile(r"['\u2019]s\b", re.IGNORECASE)
_APOS = re.compile(r"['\u2019]")
_HEX_CHARS = frozenset("0123456789abcdef")

#: Function words and headline filler: ignored for story matching (not for Layer 3 Jaccard,
#: which works on the full normalized word set: docs/rules.md#layer-3-title-similarity).
_STOPWORD_TEXT = """a an the and or but nor of to in on for at by with from as into onto over under about
    above below after before since until than then so if is are was were be been being am it
    its it's this that these those there here who whom whose which what when where why how
    will would can could may might must shall should has have had having do does did not no
    yes up down out off more most less very just also still new says say said amid via vs
    per us we you your our my me he she his her him they them their i s t re ve ll d m
    ng sa ang mga ay si ni kay nang para pag ito iyon mula kung dahil nga naman siya sila kami
    tayo ako niya nila natin namin ating aming kanila kanyang kaniyang ngayon umano raw daw"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())


def strip_title_affixes(title: str, publisher: str | None = None) -> str:
    """Drop Layer 3 prefixes ("Breaking:", "Update:", "UPDATE 1-", "ICYMI:", "JUST IN:") and
    publisher suffixes (" - Reuters", " | BBC News"), keeping the original case.

    A suffix is removed when it names the article's ``publisher`` or looks like a publisher
    name (short segment with a word such as "News", "Times", ".com"). Never returns an empty
    string when the input had words: if stripping would empty it, the input is kept.
    """
    if not title.isascii():
        title = unicodedata.normalize("NFKC", title)
    t = " ".join(title.split())
    if not t:
        return t
    out = t
    head = t[:48]
    if ":" in head or "-" in head or "|" in head or "\u2013" in head or "\u2014" in head:
        out = _WIRE_UPDATE.sub("", out, count=1)
        out = _PREFIX.sub("", out, count=1)
    if out.endswith(("...", "\u2026")):
        out = _ELLIPSIS.sub("", out)
    cut = max(out.rfind(sep) for sep in _SUFFIX_SEPARATORS)
    if cut > 0:
        seg = out[cut:].strip(" -|:\u2013\u2014")
        if 2 <= len(seg) <= 40 and (
            (publisher and _norm_pub(seg) == _norm_pub(publisher))
            or (len(seg.split()) <= 4 and _PUBLISHER_HINTS.search(seg))
        ):
            out = out[:cut]
    out = out.strip()
    return out if _WORD.search(out) else t


def _norm_pub(s: str) -> str:
    return _PUNCT_TO_SPACE.sub("", s.lower()).replace(" ", "")


def normalize_title(title: str, publisher: str | None = None) -> str:
    """Layer 3 title normalization (docs/rules.md#layer-3-title-similarity): affixes dropped,
    lowercase, punctuation stripped, whitespace collapsed, accents kept (NFKC).

    >>> normalize_title("UPDATE 1-Fed holds rates - Reuters")
    'fed holds rates'
    >>> normalize_title("BREAKING: Café owner's \u201cbig\u201d win | BBC News", "BBC News")
    'café owner big win'
    """
    t = strip_title_affixes(title, publisher).lower()
    if "'" in t or "\u2019" in t:
        t = _APOS_S.sub("", t)
        t = _APOS.sub("", t)
    if t.isascii():  # fast path, same result as the regex below for ASCII text
        return " ".join(t.translate(_ASCII_NONWORD_TO_SPACE).split())
    return _WS.sub(" ", _PUNCT_TO_SPACE.sub(" ", t)).strip()


def title_tokens(title: str, publisher: str | None = None) -> list[str]:
    """Words of the normalized title, in order (the word set of the Layer 3 Jaccard)."""
    return normalize_title(title, publisher).split()


#: headline abbreviations written out for story matching ("Israeli court paves way for govt
#: formation" and "... Form Government")
_ABBREVIATED = {"govt": "government", "govts": "governments"}


def content_tokens(words: Iterable[str], stem: bool = True) -> list[str]:
    """Story-matching terms: stop words and 1-character words dropped, headline abbreviations
    written out ("govt"), plurals stripped."""
    out: list[str] = []
    for w in words:
        if len(w) < 2 or w in STOPWORDS:
            continue
        w = _ABBREVIATED.get(w, w)
        out.append(light_stem(w) if stem else w)
    return out


def url_slug_tokens(url: str | None) -> list[str]:
    """Words of the URL's slug (the path segment with the most ``-``/``_``), e.g.
    ``.../asian-stocks-tumble-weak-china-japan-data-22842362`` -> asian stocks tumble ...

    Publishers often put the original headline in the slug; it is the only body-like text a
    headline-only feed has. Numbers and hex ids are dropped. ``[]`` when there is no slug.
    """
    if not url:
        return []
    rest = url.split("://", 1)[-1]
    slash = rest.find("/")
    if slash < 0:
        return []
    path = rest[slash + 1 :].split("?", 1)[0].split("#", 1)[0]
    best = ""
    best_n = 1
    for seg in path.split("/"):
        n = seg.count("-") + seg.count("_")
        if n > best_n:
            best, best_n = seg, n
    if not best:
        return []
    dot = best.rfind(".")
    if dot > 0 and len(best) - dot <= 6:
        best = best[:dot]
    words = best.lower().replace("_", "-").replace("'", "").split("-")
    # keep words; drop numbers, ids with digits and long hex ids ("4e8417a7", "22842362")
    return [w for w in words
            if w.isalpha() and not (len(w) >= 6 and w.isascii() and _HEX_CHARS.issuperset(w))]


def word_shingles(tokens: Sequence[str], k: int = 1) -> list[str]:
    """k-word shingles (k=1: the word set itself) joined by a space; a text shorter than
    k words gives one shingle of the whole text (so short titles still have a fingerprint)."""
    if k <= 1:
        return list(dict.fromkeys(tokens))
    if len(tokens) < k:
        return [" ".join(tokens)] if tokens else []
    return list(dict.fromkeys(" ".join(tokens[i : i + k]) for i in range(len(tokens) - k + 1)))


def char_shingles(text: str, k: int = 5) -> list[str]:
    """Character k-shingles of a normalized text (Layer 4 body fingerprints use word shingles,
    :func:`word_shingles`: docs/rules.md#layer-4-body-fingerprints)."""
    t = _WS.sub(" ", text).strip()
    if len(t) <= k:
        return [t] if t else []
    return list(dict.fromkeys(t[i : i + k] for i in range(len(t) - k + 1)))


# --- dates in titles --------------------------------------------------------------------------

#: month names (English, and Filipino/Spanish where they differ) -> month number
_MONTHS = {
    "jan": 1, "january": 1, "enero": 1, "feb": 2, "february": 2, "pebrero": 2, "febrero": 2,
    "mar": 3, "march": 3, "marso": 3, "marzo": 3, "apr": 4, "april": 4, "abril": 4,
    "may": 5, "mayo": 5, "jun": 6, "june": 6, "hunyo": 6, "junio": 6,
    "jul": 7, "july": 7, "hulyo": 7, "julio": 7, "aug": 8, "august": 8, "agosto": 8,
    "sep": 9, "sept": 9, "september": 9, "setyembre": 9, "septiembre": 9,
    "oct": 10, "october": 10, "oktubre": 10, "octubre": 10,
    "nov": 11, "november": 11, "nobyembre": 11, "noviembre": 11,
    "dec": 12, "december": 12, "disyembre": 12, "diciembre": 12,
}
_MONTH_ALT = "|".join(sorted(_MONTHS, key=len, reverse=True))
#: "April 16, 2020", "May 6th", "Sept. 3" / "6 May", "16th of April"; the month must start
#: with a capital letter ("may 6" in running text is rarely a date, "May 6" is)
_DATE_MD = re.compile(rf"\b((?=[A-Z])(?i:{_MONTH_ALT}))\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?![:.,]?\d)")
_DATE_DM = re.compile(rf"(?<![\d.,:])\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?((?=[A-Z])(?i:{_MONTH_ALT}))\b")


def title_dates(title: str) -> tuple[str, ...]:
    """Calendar days a title names, as sorted ``"M-D"`` keys (the year is left out: a
    programme's episodes differ by their day).

    Recurring items of one outlet ("TV Patrol North Luzon - April 16, 2020", "Best of
    cartoons, May 7, 2020") share every other word; the day is what tells them apart.

    >>> title_dates("TV Patrol North Luzon - April 16, 2020")
    ('4-16',)
    >>> title_dates("Covid-19: What happened on 6 May"), title_dates("Best of cartoons, May 7th")
    (('5-6',), ('5-7',))
    >>> title_dates("Trump may 2 things"), title_dates("Apple sold 3 million"), title_dates("May 2020 jobs")
    ((), (), ())
    """
    if not title or not any(c.isdigit() for c in title):
        return ()
    out: set[str] = set()
    for m in _DATE_MD.finditer(title):
        day = int(m.group(2))
        if 1 <= day <= 31:
            out.add(f"{_MONTHS[m.group(1).lower()]}-{day}")
    for m in _DATE_DM.finditer(title):
        day = int(m.group(1))
        if 1 <= day <= 31:
            out.add(f"{_MONTHS[m.group(2).lower()]}-{day}")
    return tuple(sorted(out))


#: a programme's upload: its name, at most this many words, then its day ("TV Patrol North
#: Luzon - May 5, 2020"); one channel's regional editions of a day share all but a name
_EPISODE_WORDS = 5
_YEAR_END = re.compile(r"[\s,.]*\b(?:19|20)\d\d\s*[).]?\s*$")


def episode_keys(title: str) -> tuple[str, ...]:
    """:func:`title_dates`' day keys; when the title is a short name ending in its day, each
    with that name after an "@" ("5-5@tv patrol north luzon"): the regional editions of one
    day (TV Patrol North Luzon, North Mindanao, Southern Mindanao ...) are other episodes, as
    the days of one programme are. A key without a name matches any name of its day.

    >>> episode_keys("TV Patrol North Luzon - May 5, 2020")
    ('5-5@tv patrol north luzon',)
    >>> episode_keys("Covid-19: What happened on 6 May"), episode_keys("Trump says May 5 vote will go ahead as planned")
    (('5-6@covid 19 what happened on',), ('5-5',))
    """
    days = title_dates(title)
    if not days:
        return days
    t = _YEAR_END.sub("", title).rstrip(" )")
    last = max((m for rx in (_DATE_MD, _DATE_DM) for m in rx.finditer(t)), key=lambda m: m.end(), default=None)
    if last is None or last.end() != len(t):
        return days
    name = normalize_title(t[: last.start()]).split()
    if not 2 <= len(name) <= _EPISODE_WORDS:
        return days
    return tuple(f"{d}@{' '.join(name)}" for d in days)


# --- short headlines (labels) -----------------------------------------------------------------

_TITLE_TAIL = re.compile(r"\s+[-–—|]\s+[^-–—|]{2,40}$")
#: clause ends: ":", ";", "|", a spaced dash ("--" too), a comma; and a sentence's period before a capital
#: or a digit ("… so far. And, …"), which :func:`short_headline` keeps only after a word that
#: is not an abbreviation ("U.S. Senate", "Gov. Cuomo" do not end a sentence)
_CLAUSE = re.compile(r"\s*[:;|]\s+|\s+(?:--|[-–—])\s+|,\s+|(?<=[^\W_])\.\s+(?=[\"'‘“]?[A-Z0-9])")
_ABBREVIATION_TEXT = (
    "mr mrs ms dr prof gov sen rep gen lt col capt sgt st mt ft jr sr rev pres vs no inc co corp "
    "ltd jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n e.u d.c")
_ABBREVIATIONS = frozenset(_ABBREVIATION_TEXT.split())
#: words a cut headline must not end on ("… costing a …", "… breaking rules to …")
_DANGLING_TEXT = (
    "a an the and or but nor of to in on at by for with from as into onto than that which who "
    "whose whom is are was were be been being has have had will would can could may might must "
    "shall should his her its their our your my this these those if so not")
_DANGLING = frozenset(_DANGLING_TEXT.split())


def _dangles(head: str) -> bool:
    words = head.split()
    if not words:
        return True
    last = words[-1].strip("\"'‘’“”").lower()
    return last in _DANGLING or not any(c.isalnum() for c in last)  # "… says -- …"


#: verbs whose object follows them: a cut right after one leaves half a sentence ("What Kim Yo
#: Jong's rise to the top says -- and doesn't say -- about being a woman in North Korea"); not
#: "show" and "reveal", nouns as often ("… Thunder Of Niagara Show; Other air shows cancelled")
_OBJECT_VERBS = frozenset({"says", "say", "means", "mean", "tells", "tell", "reveals", "shows"})
#: an aside between two spaced dashes of the same kind ("says -- and doesn't say -- about")
_DASH_ASIDE = re.compile(r"\s+(--|[–—])\s+((?:(?!\s(?:--|[–—])\s)\S+\s+){0,5}?\S+)\s+\1\s+")
_CLOSERS = {"‘": "’", "“": "”", "(": ")", "[": "]"}
#: a straight quote opening a quotation (not an apostrophe: "Jong's", "doesn't")
_STRAIGHT_OPEN = re.compile(r"(?:^|(?<=[\s(\[‘“]))(['\"])(?=\w)")


@functools.lru_cache(maxsize=1 << 12)
def _spans(text: str) -> tuple[tuple[int, int], ...]:
    """(opener, closer) offsets of the text's quotations and brackets (‘…’, “…”, "…", '…', (…),
    […]); an opener the text never closes is none."""
    out: list[tuple[int, int]] = []
    for i, ch in enumerate(text):
        close = _CLOSERS.get(ch)
        if close is None:
            continue
        j = i + 1
        while (j := text.find(close, j)) >= 0:
            if not (close == "’" and j + 1 < len(text) and text[j + 1].isalpha()):  # "Europe’s"
                out.append((i, j))
                break
            j += 1
    for m in _STRAIGHT_OPEN.finditer(text):
        q, i = m.group(1), m.start(1)
        j = i + 1
        while (j := text.find(q, j)) >= 0:
            if not text[j - 1].isspace() and not (j + 1 < len(text) and text[j + 1].isalnum()):
                out.append((i, j))
                break
            j += 1
    return tuple(out)


def _inside(text: str, k: int) -> list[tuple[int, int]]:
    """The quotations and brackets of ``text`` a cut at offset ``k`` falls inside of."""
    return [(i, j) for i, j in _spans(text) if i < k <= j]


def _verb_cut(head: str) -> bool:
    """A cut head ending on a verb that needs its object ("What X says"), not on an attribution
    after a comma ("Virus peak has passed, WHO says")."""
    last = (head.split() or [""])[-1]
    if last.strip("\"'‘’“”").lower() not in _OBJECT_VERBS:
        return False
    before, comma, tag = head.rpartition(", ")
    return not (comma and before and len(tag.split()) <= 4)


def _clause_heads(t: str, max_words: int) -> Iterator[str]:
    """The clause heads a headline can be cut to, in order: 3 to ``max_words`` words, not on a
    dangling word or an abbreviation's period."""
    for m in _CLAUSE.finditer(t):
        head = t[: m.start()]
        if m.group().lstrip().startswith(".") and head.rsplit(None, 1)[-1].lower() in _ABBREVIATIONS:
            continue
        n = len(head.split())
        if n > max_words:
            break
        if n >= 3 and not _dangles(head):
            yield head


#: words a label may run over its length to finish a quotation its cut falls into
_QUOTE_SLACK = 3


def _word_cut(t: str, max_words: int) -> str:
    """:func:`short_headline`'s last resort (the first ``max_words``
    words, none dangling, and "…"), except inside a quotation or brackets: a cut there runs on
    to the closing mark when that is at most ``_QUOTE_SLACK`` words further ("… vaccine 'by the
    end of the year'"), else closes what it cut into after the "…" (a quotation's elision,
    "… DeSantis cites 'light …'"): a label never leaves one open."""
    toks = t.split()
    cut = toks[:max_words]
    while len(cut) > 3 and _dangles(" ".join(cut)):
        cut.pop()
    head = " ".join(cut).rstrip(",;:")
    k = 0  # where the head ends in t (t's words are separated by single spaces)
    for w in cut:
        k = t.index(w, k) + len(w)
    k -= len(" ".join(cut)) - len(head)
    opened = sorted(_inside(t, k), reverse=True)  # the innermost first
    if not opened:
        return f"{head} …"
    n = len(t[: opened[-1][1] + 1].split())  # the words up to the outermost closing mark
    if n <= max_words + _QUOTE_SLACK:
        return t if n == len(toks) else " ".join(toks[:n]).rstrip(",;:") + " …"
    return f"{head} …" + "".join(t[j] for _, j in opened)


def short_headline(title: str, max_words: int = 10) -> str:
    """A short form of a headline for a label: the publisher suffix (" - BBC News") dropped;
    when longer than ``max_words``, its first clause (up to ":", " - ", ";", ",", or a sentence's
    end) if that has 3+ words and does not end on a function word, else the first ``max_words``
    words without trailing function words, and "…" (a visible cut, never a silent one). A cut
    - never falls inside a quotation or brackets: the label keeps the whole quotation (half of
      one misquotes: "Emotional abuse: ‘My fiance seemed perfect" from "… perfect - but he
      wanted to control me’"), or, cut at ``max_words`` words, finishes it when it ends within
      ``_QUOTE_SLACK`` words, else closes it after the "…" (:func:`_word_cut`);
    - never ends on a verb whose object it cuts off ("What Kim Yo Jong's rise to the top says"):
      the headline is shortened by the next rule instead, with an aside between spaced dashes
      left out rather than its object ("… says about being a woman …").

    >>> short_headline("War in Iran costs $29 billion so far. And, students are finally improving in math", 14)
    'War in Iran costs $29 billion so far'
    >>> short_headline("Lockdown professor steps down after breaking rules to meet married lover", 8)
    'Lockdown professor steps down after breaking rules …'
    >>> short_headline("U.S. Sen. Smith and Gov. Jones agree on a plan to reopen the state's beaches next week", 10)
    'U.S. Sen. Smith and Gov. Jones agree on a plan …'
    """
    t = " ".join((title or "").split())
    stripped = _TITLE_TAIL.sub("", t) if len(t.split()) > 4 else t
    # a "suffix" inside a quotation, or after "says", is the headline's, not a publisher's
    base = t if stripped != t and (_inside(t, len(stripped)) or _verb_cut(stripped)) else stripped
    if len(base.split()) <= max_words:
        return base
    verb_cut = False
    for head in _clause_heads(base, max_words):
        if _inside(t, len(head)):
            continue
        if _verb_cut(head):
            verb_cut = True
            continue
        return head
    if verb_cut:  # "What X says -- and doesn't say -- about Y": without the aside
        plain = _DASH_ASIDE.sub(" ", base)
        if plain != base:
            return short_headline(plain, max_words)
    return _word_cut(base, max_words)
