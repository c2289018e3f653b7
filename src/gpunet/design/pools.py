"""Sticky numbering from a pool: what a previous plan held is kept, new holders take the next free
index (lowest first, or highest first for pools shared with node addresses counting up)."""

from __future__ import annotations

from collections.abc import Iterable


class IndexPool:
    """Indexes first..last; `taken` ones (node addresses, a gateway) are never handed out."""

    def __init__(self, first: int, last: int, taken: Iterable[int] = (), downward: bool = False) -> None:
        self.first, self.last, self.downward = first, last, downward
        self.taken = {i for i in taken if first <= i <= last}
        self.cursor = last if downward else first

    @property
    def size(self) -> int:
        return max(0, self.last - self.first + 1)

    def claim(self, index: int | None) -> int | None:
        """Keep a previous index if it is inside the pool and still free."""
        if index is None or not self.first <= index <= self.last or index in self.taken:
            return None
        self.taken.add(index)
        return index

    def next_free(self) -> int | None:
        step = -1 if self.downward else 1
        while self.first <= self.cursor <= self.last and self.cursor in self.taken:
            self.cursor += step
        if not self.first <= self.cursor <= self.last:
            return None
        self.taken.add(self.cursor)
        return self.cursor


def sticky(keys: Iterable[str], previous: dict[str, int], pool: IndexPool) -> tuple[dict[str, int], list[str]]:
    """An index per key: its previous one where the pool still holds it, else the next free. Also
    the keys left without one (the pool is full)."""
    ordered = list(dict.fromkeys(keys))
    chosen = {k: i for k in ordered if (i := pool.claim(previous.get(k))) is not None}
    left: list[str] = []
    for key in ordered:
        if key not in chosen:
            index = pool.next_free()
            if index is None:
                left.append(key)
            else:
                chosen[key] = index
    return chosen, left
