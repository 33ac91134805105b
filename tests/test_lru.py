"""lru.SizedLru: the size-bounded caches of lookups."""

from __future__ import annotations

from hoodie_ray.lru import SizedLru


def test_opened_files_are_keyed_by_size_and_bounded() -> None:
    """A file listed with another size (a log file appended to) is another entry (the key of
    ``metadata.reader.OPENED_FILES``); the least recently used go past the byte bound; an
    entry over ``max_entry`` is never kept."""
    cache = SizedLru(100, max_entry=25)
    cache.put(("a", 10), "a10", 10)
    assert cache.get(("a", 10)) == "a10" and cache.get(("a", 11)) is None
    cache.put(("big", 26), "big", 26)
    assert cache.get(("big", 26)) is None
    for i in range(9):
        cache.put((f"f{i}", 20), i, 20)
        cache.get(("a", 10))  # kept in use
    assert cache.get(("a", 10)) == "a10"
    assert [cache.get((f"f{i}", 20)) for i in range(9)] == [None] * 5 + [5, 6, 7, 8]
    assert len(cache) == 5 and cache.nbytes == 90
