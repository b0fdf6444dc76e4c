"""Which names can reach a fuzzy-match threshold, without scoring them all.

rapidfuzz's ``fuzz.ratio`` is ``100 * (1 - d / (len(a) + len(b)))``, ``d`` the indel distance
(insertions and deletions). So ``a`` and ``b`` reach ``threshold`` only if
``d <= D = (1 - threshold / 100) * (len(a) + len(b))``, and then:

* ``|len(a) - len(b)| <= d <= D``;
* they share at least ``max(len(a), len(b)) - 1 - 2 * D`` character bigrams, counted as
  multisets: each insertion or deletion breaks at most two of a string's bigrams, and every
  bigram of ``a`` left whole is one of ``b``'s (the q-gram lemma, Jokinen and Ukkonen 1991).

:class:`NameFilter` keeps each bigram's postings (which names hold it, how often), so a query
string reads only the postings of its own bigrams and returns the names that pass both bounds:
a superset of the names that reach the threshold, which the caller then scores exactly. Scoring
every name instead costs rapidfuzz tens of nanoseconds per name and query string, and it converts
the whole list of names on every call (scoring_core/README.md, "Fuzzy name look-ups", has both
measured). The filter's own cost is about 10 microseconds per n-gram against SciFact's 15,645
names (32 for the numpy version it replaced, same machine and n-grams).

The look-up is one numba kernel that releases the GIL: the graph leg runs it on a worker thread
beside the event loop and the engine's searches, which need the GIL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scoring_core._jit import kernel

#: a bigram as one integer: the first code point above the second (code points are below 2**21)
_SHIFT = 21
#: float slack on the distance bound, so that rounding never drops a name the scorer would keep
_EPSILON = 1e-6


class NameFilter:
    """Bigram postings of a fixed list of names (built once per list, then only read: thread-safe).

    Names are numbered internally by length, so that the names of one length are one slice; each
    bigram's postings are split by how often a name holds it (rank r: the names holding it at
    least r times), so that a query holding a bigram c times reads the first c ranks and the
    number of postings a name is in is the multiset intersection. The postings are flat arrays:
    bigram ``u`` (``_bigrams`` sorted) has ranks ``_rank_start[u]`` to ``_rank_start[u + 1]``, and
    rank slot ``s`` holds ``_ids[_slot_start[s]:_slot_start[s + 1]]``.
    """

    def __init__(self, names: Sequence[str]) -> None:
        lengths = np.fromiter((len(n) for n in names), dtype=np.int64, count=len(names))
        self._order = np.argsort(lengths, kind="stable")  # internal number -> index in ``names``
        ordered = [names[i] for i in self._order.tolist()]
        sorted_lengths = lengths[self._order]
        #: the internal numbers of the names of each length: ``[_starts[L], _starts[L + 1])``
        self._starts = np.searchsorted(sorted_lengths, np.arange(int(sorted_lengths.max(initial=0)) + 2)).astype(np.int64)
        points = np.frombuffer("".join(ordered).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
        owner = np.repeat(np.arange(len(ordered), dtype=np.int64), sorted_lengths)
        inside = owner[:-1] == owner[1:] if len(points) > 1 else np.zeros(0, dtype=bool)
        codes = ((points[:-1] << _SHIFT) | points[1:])[inside]
        holder = owner[:-1][inside]
        # Sorted by bigram, then name: one integer sort when the name numbers fit beside the bigram
        # (a quarter of the time of a two-key lexsort).
        order = np.argsort((codes << _SHIFT) | holder) if len(ordered) < 1 << _SHIFT else np.lexsort((holder, codes))
        codes, holder = codes[order], holder[order]
        # The rank of each occurrence among the same name's occurrences of the same bigram.
        n = len(codes)
        new_group = np.ones(n, dtype=bool)
        new_group[1:] = (codes[1:] != codes[:-1]) | (holder[1:] != holder[:-1])
        rank = np.arange(n) - np.maximum.accumulate(np.where(new_group, np.arange(n), 0)) if n else np.zeros(0, dtype=np.int64)
        # Regrouped by bigram, then rank (a stable sort keeps the names ascending in each slot). A
        # bigram's ranks are 0, 1, ... without a gap: a name holding it r + 1 times holds it r times.
        by_rank = np.lexsort((rank, codes))
        codes, rank, self._ids = codes[by_rank], rank[by_rank], np.ascontiguousarray(holder[by_rank], dtype=np.int64)
        new_slot = np.ones(n, dtype=bool)
        new_slot[1:] = (codes[1:] != codes[:-1]) | (rank[1:] != rank[:-1])
        slot_first = np.flatnonzero(new_slot)
        self._slot_start = np.append(slot_first, n).astype(np.int64)
        slot_codes = codes[slot_first]
        new_code = np.ones(len(slot_first), dtype=bool)
        new_code[1:] = slot_codes[1:] != slot_codes[:-1]
        code_first = np.flatnonzero(new_code)
        self._bigrams = np.ascontiguousarray(slot_codes[code_first], dtype=np.int64)
        self._rank_start = np.append(code_first, len(slot_first)).astype(np.int64)
        self._order = self._order.astype(np.int64)

    def candidates(self, query: str, threshold: float) -> np.ndarray:
        """Indices (ascending) of the names that may reach ``threshold`` (0-100) against ``query``."""
        if not 0.0 <= threshold <= 100.0:  # NaN too: the kernel's bounds assume a ratio
            raise ValueError(f"threshold must lie in [0, 100], got {threshold}")
        points = np.frombuffer(query.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
        return _candidates(points, float(threshold), self._bigrams, self._rank_start, self._slot_start, self._ids, self._starts,
                           self._order)


@kernel("int64[::1](uint32[::1], float64, int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[::1])", nogil=True)
def _candidates(query, threshold, bigrams, rank_start, slot_start, ids, starts, order):  # pragma: no cover - compiled
    length = query.shape[0]
    loose = 1.0 - threshold / 100.0
    # The lengths worth a look: |length - L| <= D <= loose * (length + L) + slack, one more on
    # each side (the loop applies the exact bound; rounding must not narrow the range). Names
    # are numbered by length, so these lengths' names are one range of numbers, [low, high).
    longest = starts.shape[0] - 2
    if loose < 1.0:
        # In float: for a tiny positive threshold the bound passes int64's range, and converting it
        # there gave a negative bound that kept no name at all.
        bound = np.ceil((length * (1.0 + loose) + _EPSILON) / (1.0 - loose)) + 1.0
        if bound < longest:
            longest = np.int64(bound)
    shortest = max(0, np.int64(math.floor((length * (1.0 - loose) - _EPSILON) / (1.0 + loose))) - 1)
    if shortest > longest:
        return np.zeros(0, dtype=np.int64)
    low, high = starts[shortest], starts[longest + 1]
    if low == high:
        return np.zeros(0, dtype=np.int64)
    shared = np.zeros(high - low, dtype=np.int64)
    if length > 1:
        held = np.empty(length - 1, dtype=np.int64)
        for i in range(length - 1):
            held[i] = (np.int64(query[i]) << _SHIFT) | np.int64(query[i + 1])
        held.sort()
        i = 0
        while i < length - 1:
            j = i + 1
            while j < length - 1 and held[j] == held[i]:
                j += 1
            u = np.searchsorted(bigrams, held[i])
            if u < bigrams.shape[0] and bigrams[u] == held[i]:
                # The query holds this bigram j - i times and a name holding it k times is in its
                # first k ranks: the first j - i ranks count min(k, j - i) for each name.
                for s in range(rank_start[u], min(rank_start[u + 1], rank_start[u] + j - i)):
                    for p in range(slot_start[s], slot_start[s + 1]):
                        x = ids[p]
                        if low <= x < high:
                            shared[x - low] += 1
            i = j
    out = np.empty(high - low, dtype=np.int64)
    m = 0
    for other in range(shortest, longest + 1):
        most = np.int64(math.floor(loose * (length + other) + _EPSILON))
        if abs(length - other) > most:
            continue
        need = max(length, other) - 1 - 2 * most
        for x in range(starts[other], starts[other + 1]):
            if shared[x - low] >= need:
                out[m] = order[x]
                m += 1
    return np.sort(out[:m])
