"""Named-entity extraction for dedup Layer 5 without a model download.

000 Step 3 Layer 5 / 001 "Layer 5: Entity & Fact Overlap": "Extract named entities (people,
organizations, locations) from both articles; IF entity overlap >= 80% AND publication dates
within 24 hours THEN classify as 'same event, different coverage'".

Extraction is a capitalized-phrase heuristic (no model, ~10 µs per headline): runs of words
that start with a capital letter or are acronyms, minus a stop list of common English and
headline words. Headlines in Title Case ("Pizza Chain Sbarro Files For Bankruptcy") capitalize
everything, so the stop list, not the case, decides there. Its quality on real headlines is
measured in ``bench/README-stories.md`` (Layer 5 precision/recall).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["COMMON_WORDS", "entity_keys", "entity_overlap", "extract_entities"]

# Common English and headline words that are capitalized in Title Case headlines but are not
# names. Lowercase. Hand-written (not learned from the evaluation data).
_COMMON_TEXT = ["a", "about", "above", "across", "act", "after", "again", "against", "ago", "ahead", "aid", "all", "almost", "along", "already", "also", "although", "always", "am", "among", "an", "and", "announce", "announced", "announces", "another", "any", "anyone", "anything", "are", "area", "around", "as", "ask", "asks", "at", "attack", "attacks", "away", "back", "bad", "ban", "bank", "banks", "battle", "be", "beat", "became", "because", "become", "been", "before", "begin", "begins", "behind", "being", "believe", "below", "best", "better", "between", "big", "bill", "billion", "bills", "black", "blow", "board", "body", "book", "boost", "boosts", "born", "both", "boy", "break", "breaking", "bring", "brings", "build", "business", "but", "buy", "buys", "by", "call", "calls", "came", "campaign", "can", "cancer", "car", "case", "cases", "cause", "center", "centre", "chance", "change", "charge", "charged", "charges", "chief", "child", "children", "city", "claim", "claims", "close", "closes", "come", "comes", "coming", "company", "companies", "concern", "concerns", "could", "council", "country", "court", "crash", "crisis", "cut", "cuts", "day", "days", "dead", "deal", "deals", "death", "debt", "decision", "deep", "despite", "did", "die", "dies", "down", "drop", "drops", "due", "during", "each", "early", "earnings", "east", "economy", "end", "ends", "even", "event", "ever", "every", "exclusive", "expected", "face", "faces", "fall", "falls", "family", "fans", "far", "fast", "fear", "fears", "few", "fight", "file", "files", "final", "find", "finds", "fire", "first", "five", "for", "former", "found", "four", "free", "from", "full", "fund", "future", "game", "games", "gas", "get", "gets", "girl", "give", "gives", "go", "goes", "going", "gone", "good", "got", "government", "great", "group", "grow", "growth", "had", "half", "hand", "has", "have", "he", "head", "health", "heart", "help", "her", "here", "high", "hike", "him", "his", "hit", "hits", "hold", "holds", "home", "hope", "hot", "house", "how", "however", "huge", "i", "if", "in", "inc", "increase", "into", "is", "issue", "it", "its", "job", "jobs", "just", "keep", "key", "kid", "kids", "kill", "killed", "kills", "know", "last", "late", "latest", "launch", "launches", "law", "lead", "leads", "leave", "left", "less", "let", "life", "like", "likely", "line", "live", "long", "look", "looks", "lose", "loss", "lost", "low", "made", "make", "makes", "man", "market", "markets", "may", "me", "meet", "meeting", "men", "might", "million", "miss", "money", "month", "months", "more", "most", "move", "moves", "much", "must", "my", "near", "need", "needs", "never", "new", "news", "next", "night", "no", "north", "not", "now", "number", "of", "off", "offer", "offers", "official", "officials", "oil", "old", "on", "once", "one", "only", "open", "opens", "or", "order", "other", "our", "out", "over", "own", "part", "party", "past", "pay", "people", "percent", "phone", "plan", "plans", "play", "player", "players", "plus", "police", "power", "president", "price", "prices", "probe", "profit", "program", "public", "push", "quarter", "rate", "rates", "reach", "real", "record", "report", "reports", "rise", "rises", "rising", "risk", "rule", "rules", "run", "runs", "said", "sale", "sales", "same", "save", "say", "says", "season", "second", "see", "seen", "sees", "sell", "sells", "set", "sets", "share", "shares", "she", "shot", "show", "shows", "side", "since", "six", "small", "so", "some", "soon", "south", "star", "start", "starts", "state", "states", "stay", "still", "stock", "stocks", "stop", "story", "strike", "strong", "study", "such", "support", "sure", "take", "takes", "talk", "talks", "tax", "team", "tech", "tell", "test", "than", "that", "the", "their", "them", "then", "there", "these", "they", "thing", "things", "think", "third", "this", "those", "three", "through", "time", "times", "to", "today", "top", "total", "trade", "trial", "trip", "true", "try", "turn", "two", "under", "update", "updated", "us", "use", "used", "user", "users", "very", "video", "vote", "wall", "want", "wants", "war", "warn", "warns", "was", "watch", "water", "way", "we", "week", "weeks", "well", "were", "west", "what", "when", "where", "which", "while", "white", "who", "why", "will", "win", "wins", "with", "without", "woman", "women", "won", "word", "work", "world", "would", "year", "years", "yet", "you", "young", "your"]
COMMON_WORDS: frozenset[str] = frozenset(_COMMON_TEXT)

_TOKEN = re.compile(r"[A-Za-z\u00C0-\u024F][\w\u00C0-\u024F&.'\u2019-]*|\d+")
_POSSESSIVE = re.compile(r"['\u2019]s?$")


def _is_title_case(words: list[str]) -> bool:
    long = [w for w in words if len(w) > 3 and w[0].isalpha()]
    if len(long) < 2:
        return False
    return sum(1 for w in long if w[0].isupper()) >= 0.75 * len(long)


def extract_entities(text: str, max_entities: int = 12) -> list[str]:
    """Capitalized phrases of a headline or sentence, lowercased, in order, deduplicated.

    ``"Chiquita and Fyffes merge to create world's top banana"`` -> ``["chiquita", "fyffes"]``;
    ``"Barack Obama meets Angela Merkel in Berlin"`` -> ``["barack obama", "angela merkel",
    "berlin"]``. Acronyms count ("NSA", "GM"); numbers and common words do not.
    """
    words = _TOKEN.findall(text)
    if not words:
        return []
    title_case = _is_title_case(words)
    phrases: list[str] = []
    run: list[str] = []

    def close() -> None:
        if run:
            phrases.append(" ".join(run))
            run.clear()

    for i, raw in enumerate(words):
        w = _POSSESSIVE.sub("", raw).strip(".-'")
        low = w.lower()
        if not w or w[0].isdigit() or not w[0].isupper() or low in COMMON_WORDS:
            close()
            continue
        is_acronym = len(w) >= 2 and w.isupper()
        if (
            i == 0
            and not title_case
            and not is_acronym
            and len(words) > 1
            and not (words[1][:1].isupper() and words[1].lower() not in COMMON_WORDS)
        ):
            # sentence-initial capital of a sentence-case headline: a name only when the next
            # word is capitalized too ("Rand Paul ...") — otherwise undecidable, skip it.
            close()
            continue
        if len(low) < 2:
            close()
            continue
        run.append(low)
    close()
    out = list(dict.fromkeys(phrases))
    return out[:max_entities]


def entity_keys(entities: Iterable[str]) -> frozenset[str]:
    """Single-word keys of entity phrases ("barack obama" -> {"barack", "obama"}), so that a
    later headline saying just "Obama" still overlaps."""
    return frozenset(part for e in entities for part in e.split())


def entity_overlap(a: Iterable[str], b: Iterable[str]) -> float:
    """001 Layer 5 "entity overlap": |A ∩ B| / min(|A|, |B|) over entity keys (0 when either
    side has none). "Same event" when >= 0.8 (seed) and the dates are within 24 h."""
    sa, sb = frozenset(a), frozenset(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / min(len(sa), len(sb))
