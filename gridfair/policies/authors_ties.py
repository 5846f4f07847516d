"""The SDRF authors' tie order: the user index their simulator (github hsadok/sdrf, f0159ee)
gives its weighted DRF and SDRF, as `--form authors` reproduces it.

Their priority queues hold `[priority, user index]` (a sortedcontainers `SortedList` for
weighted DRF, their C++ live tree for SDRF), so equal priorities go to the lower index. The
index is handed out (`Task._user_index`, a counter) the first time a user id is looked up, and
for these two allocators that is in the constructor, walking a Python 2.7 dict of the user ids:
`users_weights_dict` / `users_resources_dict`, filled by walking `users_cpu_mean`, which is
itself a dict loaded from their `cred_cache.json` (written by walking the dict filled by
walking `events_by_user`, filled in order of appearance in the task file). Each walk of a
Python 2.7 dict goes in slot order, which depends on the ids' hashes, on the table size and on
the order the ids went in (collisions, resizes). So their index is order of appearance put
through four such dicts (three on the very first run, before their cache exists; every later
run reads the cache). Their plain DRF builds no dict: its index is order of appearance, as
gridfair's `UserState.index` is.

`python27_dict_order` is CPython 2.7's dict for string keys (no hash randomisation, the
default): its string hash, its open addressing with perturbation, and its resize rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gridfair.core.pool import Pool

#: Dicts the authors' simulator puts the user ids through before indexing them (a run that
#: reads their cache; the first run, which writes it, has one fewer).
AUTHORS_DICT_WALKS = 4

_MASK64 = (1 << 64) - 1
_MIN_SIZE = 8  # PyDict_MINSIZE
_PERTURB_SHIFT = 5


def python27_hash(key: str) -> int:
    """CPython 2.7's hash of a byte string (or an ASCII unicode one), as a signed C long."""
    data = key.encode("utf-8")
    if not data:
        return 0
    value = data[0] << 7
    for byte in data:
        value = ((1000003 * value) & _MASK64) ^ byte
    value ^= len(data)
    if value >= 1 << 63:
        value -= 1 << 64
    return -2 if value == -1 else value


def _insert(table: list, key_hash: tuple[str, int]) -> None:
    """Into the first free slot of CPython 2.7's probe sequence for the hash."""
    mask = len(table) - 1
    perturb = key_hash[1] & _MASK64
    slot = key_hash[1] & mask
    while table[slot & mask] is not None:
        slot = 5 * slot + perturb + 1
        perturb >>= _PERTURB_SHIFT
    table[slot & mask] = key_hash


def python27_dict_order(keys: Iterable[str]) -> list[str]:
    """The order a CPython 2.7 dict walks distinct string KEYS inserted in the order given."""
    table: list = [None] * _MIN_SIZE
    for used, key in enumerate(keys, start=1):
        _insert(table, (key, python27_hash(key)))
        if used * 3 >= len(table) * 2:  # resize to the least power of 2 above 4 x used
            size = _MIN_SIZE
            while size <= (2 if used > 50000 else 4) * used:
                size <<= 1
            old, table = table, [None] * size
            for entry in old:  # re-inserted in the old table's slot order
                if entry is not None:
                    _insert(table, entry)
    return [entry[0] for entry in table if entry is not None]


def authors_user_order(users: Sequence[str], walks: int = AUTHORS_DICT_WALKS) -> list[str]:
    """The authors' weighted DRF and SDRF user index: USERS (in order of appearance) put
    through WALKS Python 2.7 dicts."""
    order = list(users)
    for _ in range(walks):
        order = python27_dict_order(order)
    return order


def index_users(pool: Pool, users: Iterable[str]) -> None:
    """Give USERS the pool's next indexes in the order given (a user the pool already knows
    keeps its index), so ties between them go as in that order."""
    for name in users:
        pool.user(name)
