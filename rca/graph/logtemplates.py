"""Log bodies reduced to templates: masking, then Drain's streaming template miner (`drain3`).

Masking runs once over a whole batch: the bodies joined into one string, quoted values masked by
regex and tokens with digits by one numba pass over its bytes, so its cost is not a Python call
per record. A masked body seen before takes its
template from a bounded cache; only new masked bodies go through Drain. The state is bounded:
Drain keeps at most `max_templates` clusters (least recently used evicted), the cache at most
`cache_size` masked bodies, and bodies are cut at `max_body_chars`.

A template is read from the first quarter of that length of the masked body. Where a long body
is cut depends on how wide its numbers happen to be, so the last tokens of two cuts of one
message differ (a list of ids cut mid-item); the masked body's first quarter, which a body cut at
`max_body_chars` holds whole unless long numbers shrank it, reads the same for both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from drain3.drain import Drain
from numba import njit

from rca.telemetry.logs import reports_error

PARAM = "<*>"
TEMPLATE_SHARE = 4  # a template is the masked body's first max_chars / 4 (module docstring)
_QUOTED = (re.compile(r'"[^"\n]*"'), re.compile(r"'[^'\n]*'"))
_PARAM_RUN = re.compile(r"<\*>(?:[,; \t]*<\*>)+")  # a list of any length is one parameter
_WORD_LIST = re.compile(r"\[(?:[^\[\]\s,]++, )++[^\[\]\s,]++\]")  # so is a bracketed list of words: [nanjing, suzhou]
_NEWLINES = str.maketrans({"\n": " ", "\r": " "})
# Tokens are split at whitespace and at these; '.', ':', '-' and '_' stay inside tokens, so that
# an address, a time, a version or a UUID is one token.
_DELIMITERS = np.zeros(256, np.bool_)
_DELIMITERS[[ord(c) for c in " \t\n[](){},;=<>/|\"'"]] = True
_HASH, _NEWLINE = ord("#"), ord("\n")
_PARAM_BYTES = np.frombuffer(PARAM.encode(), np.uint8)


@njit(cache=True, nogil=True)
def _mask_tokens(
    text: npt.NDArray[np.uint8], delimiters: npt.NDArray[np.bool_], param: npt.NDArray[np.uint8]
) -> npt.NDArray[np.uint8]:
    """`text` with every token that holds a digit replaced by `param`, except tokens holding a
    '#' (code locations such as `ServiceImpl#532`, which tell code paths apart)."""
    out = np.empty(text.shape[0] + text.shape[0] * param.shape[0] // 2 + 1, np.uint8)
    n, i, size = 0, 0, text.shape[0]
    while i < size:
        if delimiters[text[i]]:
            out[n] = text[i]
            n += 1
            i += 1
            continue
        j, digit, hashed = i, False, False
        while j < size and not delimiters[text[j]]:
            c = text[j]
            digit |= 48 <= c <= 57
            hashed |= c == _HASH
            j += 1
        if digit and not hashed:
            for k in range(param.shape[0]):
                out[n + k] = param[k]
            n += param.shape[0]
        else:
            for k in range(i, j):
                out[n] = text[k]
                n += 1
        i = j
    return out[:n]


def mask_bodies(bodies: Sequence[str], max_chars: int) -> list[str]:
    """Each body cut at `max_chars`, on one line, with its variable parts masked (quoted values,
    every token with a digit in it: numbers, ids, hashes, addresses, times; lists of them and
    bracketed lists of words, whatever their length) and the masked text cut at
    `max_chars // TEMPLATE_SHARE`."""
    if not bodies:
        return []
    text = "\n".join(b[:max_chars].translate(_NEWLINES) if "\n" in b or "\r" in b else b[:max_chars] for b in bodies)
    for pattern in _QUOTED:
        text = pattern.sub('"<*>"', text)
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    masked = _mask_tokens(raw, _DELIMITERS, _PARAM_BYTES).tobytes().decode("utf-8", "surrogatepass")
    keep = max_chars // TEMPLATE_SHARE
    masked = _WORD_LIST.sub(f"[{PARAM}]", _PARAM_RUN.sub(PARAM, masked))
    return [line[:keep] for line in masked.split("\n")]


class TemplateMiner:
    """Template ids for log bodies, stable for as long as a template is in use."""

    def __init__(
        self,
        *,
        max_templates: int = 20_000,
        cache_size: int = 200_000,
        max_body_chars: int = 2_048,
        similarity: float = 0.4,
        depth: int = 4,
    ) -> None:
        self.max_templates = max_templates
        self.cache_size = cache_size
        self.max_body_chars = max_body_chars
        # Numeric tokens left after masking are code locations and versions: tree keys, not wildcards.
        self._drain = Drain(
            depth=depth, sim_th=similarity, max_clusters=max_templates, parametrize_numeric_tokens=False
        )
        self._cache: dict[str, int] = {}
        self._texts: dict[int, str] = {}
        self._error_reports: set[int] = set()  # templates some body of which reported an error

    def ids(self, bodies: Sequence[str]) -> npt.NDArray[np.int64]:
        """The template id of each body (ids start at 1)."""
        masked = mask_bodies(bodies, self.max_body_chars)
        cache = self._cache
        found = [cache.get(m, 0) for m in masked]
        for i in [i for i, t in enumerate(found) if t == 0]:
            m = masked[i]
            t = cache.get(m, 0)
            if t == 0:
                cluster, _ = self._drain.add_log_message(m)
                t = int(cluster.cluster_id)
                self._texts[t] = cluster.get_template()
                if reports_error(m):
                    self._error_reports.add(t)
                if len(cache) >= self.cache_size:
                    self._forget()
                cache[m] = t
            found[i] = t
        ids = np.asarray(found, np.int64)
        clusters = self._drain.id_to_cluster
        for t in np.unique(ids).tolist():  # templates in use stay young in Drain's LRU
            if t in clusters:
                clusters[t]  # the lookup is what refreshes the entry
        return ids

    def _forget(self) -> None:
        """Empties the cache, keeping the texts of the templates Drain still holds."""
        self._cache.clear()
        live = self._drain.id_to_cluster
        self._texts = {t: text for t, text in self._texts.items() if t in live}
        self._error_reports = {t for t in self._error_reports if t in live}

    def text(self, template: int) -> str:
        """The template's text (its latest form), or `#id` once it is forgotten."""
        cluster = self._drain.id_to_cluster.get(template)
        if cluster is not None:
            text: str = cluster.get_template()
            return text
        return self._texts.get(template, f"#{template}")

    def error_reports(self, templates: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Whether each template's bodies reported an error (`rca.telemetry.logs.reports_error`):
        read from the bodies, since Drain may since have masked the exception's class in the text."""
        named = self._error_reports
        return np.fromiter((t in named for t in templates.tolist()), np.bool_, templates.shape[0])

    def __len__(self) -> int:
        """Templates Drain holds now."""
        return len(self._drain.id_to_cluster)

    @property
    def cached(self) -> int:
        """Masked bodies the cache holds now."""
        return len(self._cache)
