"""Dense ids for int64 keys, in order of first appearance.

An open-addressing hash table in numpy arrays (at most half full, probed linearly), filled by a
numba kernel that runs without the GIL: the graph writer's window tables and node-operation ids
take a whole batch of keys in one call, with no sorting and no per-key Python objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier
Num = Any  # a numba integer scalar: numba, not mypy, types the kernels


@njit(cache=True, nogil=True)
def ids_of(
    slot_keys: npt.NDArray[np.int64],
    slot_ids: npt.NDArray[np.int64],
    keys_at: npt.NDArray[np.int64],
    n_ids: Num,
    keys: npt.NDArray[np.int64],
    ids: npt.NDArray[np.int64],
) -> tuple[Num, Num]:
    """Fills `ids` with each key's id, giving new keys the next ids in order, until `keys_at` is
    full; returns the ids in use and how many keys were done. The slots (a power of two, at least
    twice `keys_at`) hold id -1 where free."""
    mask = np.uint64(slot_keys.shape[0] - 1)
    for k in range(keys.shape[0]):
        key = keys[k]
        mixed = np.uint64(key) * GOLDEN
        slot = (mixed ^ (mixed >> np.uint64(32))) & mask
        while slot_ids[slot] >= 0 and slot_keys[slot] != key:
            slot = (slot + np.uint64(1)) & mask
        if slot_ids[slot] < 0:
            if n_ids == keys_at.shape[0]:
                return n_ids, k
            slot_keys[slot], slot_ids[slot], keys_at[n_ids] = key, n_ids, key
            n_ids += 1
        ids[k] = slot_ids[slot]
    return n_ids, keys.shape[0]


class IntIndex:
    """int64 key → dense id (0, 1, ... in order of first appearance)."""

    def __init__(self) -> None:
        self._n = 0
        self._keys = np.zeros(16, np.int64)
        self._slot_keys = np.zeros(32, np.int64)
        self._slot_ids = np.full(32, -1, np.int64)

    def __len__(self) -> int:
        return self._n

    @property
    def keys(self) -> npt.NDArray[np.int64]:
        """The keys by id."""
        return self._keys[: self._n]

    def nbytes(self) -> int:
        return self._keys.nbytes + self._slot_keys.nbytes + self._slot_ids.nbytes

    def ids(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The id of each key, new ids for keys not seen before."""
        ids = np.empty(keys.shape[0], np.int64)
        done = 0
        while True:
            self._n, placed = ids_of(self._slot_keys, self._slot_ids, self._keys, self._n, keys[done:], ids[done:])
            done += placed
            if done == keys.shape[0]:
                return ids
            self._grow()

    def _grow(self) -> None:
        capacity = 2 * self._keys.shape[0]
        known = self.keys.copy()  # distinct: they get back the ids they had
        self._keys = np.zeros(capacity, np.int64)
        self._slot_keys = np.zeros(2 * capacity, np.int64)
        self._slot_ids = np.full(2 * capacity, -1, np.int64)
        self._n, _ = ids_of(self._slot_keys, self._slot_ids, self._keys, 0, known, np.empty(known.shape[0], np.int64))
