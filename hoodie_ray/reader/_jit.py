"""numba kernels of :class:`hoodie_ray.reader.compiled_merger.CompiledLogRecordBuffer`
(imported only when it is used).

The key table is open addressing with linear probing over ``slots``, a ``(capacity, 4)``
uint64 array, one 32-byte row per distinct record key holding everything a merge decision
needs, so a record costs one random memory access:

* ``[0]`` the key's 64-bit hash (:func:`key_hashes`);
* ``[1]`` ``(record number + 1) | key length << 32 | state << 56`` of the key's current
  entry (its record number, and its state byte: the flag bits below); 0 = empty;
* ``[2]`` a key of at most 8 bytes: its bytes, little-endian, zero-padded; a longer key: the
  offset of its bytes in ``arena``;
* ``[3]`` the entry's ordering value as an int64 that orders like it (``ord_keys`` in
  ``compiled_merger``), stored as its bits.

A probe matches only when hash, length and every byte are equal, so two keys sharing a hash
are two entries. Each record also has a state byte in ``rec_state`` (by record number): the
bits of :mod:`hoodie_ray.merge`, where the kernels keep ``ALIVE`` (the record is its key's
entry) and ``CONSUMED`` (it lost to its base record) for the caller. Whether a version wins
is decided by the merge rule's own functions, compiled here (``merge.wins_by_state``).
"""

# mypy: ignore-errors

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from hoodie_ray import merge
from hoodie_ray.index import _jit as index_jit
from hoodie_ray.index import key_hash
from hoodie_ray.index._jit import finish_key_hash
from hoodie_ray.index.key_hash import FNV_OFFSET, FNV_PRIME, GOLDEN
from hoodie_ray.jit import drop_stale_kernels

# The state bits of hoodie_ray.merge, as the byte the kernels keep per record.
ALIVE = np.uint8(merge.ALIVE)
CONSUMED = np.uint8(merge.CONSUMED)
RESET = np.uint8(merge.RESET)
NOT_ALIVE = np.uint8(0xFF ^ merge.ALIVE)

INLINE = 8
REC_MASK = np.uint64(0xFFFFFFFF)
LEN_MASK = np.uint64(0xFFFFFF)
LEN_SHIFT = np.uint64(32)
STATE_SHIFT = np.uint64(56)

#: THE merge rule (hoodie_ray.merge), compiled into the kernels that call it.
_wins = numba.njit(inline="always")(merge.wins_by_state)
_at_least = numba.njit(inline="always")(merge.at_least_by_state)


#: Records ahead whose slot is prefetched: the table is far larger than the caches, and with
#: the loads of 8 records in flight a record costs ~30 ns instead of ~65.
PREFETCH = 8


@intrinsic
def _prefetch_row(typingctx, arr, row):
    """Hint the CPU to fetch row ``row`` of the 2-d array ``arr`` for writing (LLVM prefetch,
    high locality); no effect on the program's results."""
    sig = types.void(arr, row)

    def codegen(context, builder, signature, args):
        arr_t = signature.args[0]
        ary = context.make_array(arr_t)(context, builder, args[0])
        zero = context.get_constant(types.intp, 0)
        ptr = cgutils.get_item_pointer(context, builder, arr_t, ary, [args[1], zero])
        if getattr(ptr.type, "is_opaque", False):
            name = "llvm.prefetch.p0"
        else:  # LLVM before opaque pointers
            ptr = builder.bitcast(ptr, ir.IntType(8).as_pointer())
            name = "llvm.prefetch.p0i8"
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        builder.call(fn, [ptr, i32(1), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, nogil=True)
def key_hashes(kdata, kstart, klen, hashes, words):
    """``words[i]``: key ``i``'s bytes as a little-endian word when it has at most 8, else 0;
    ``hashes[i]``: a 64-bit hash of its bytes and length (that word, or FNV-1a over longer
    keys, then the splitmix64 finaliser: ``index.hash_keys``'s hash of a longer key). One
    pass for both: hashing a short key by its word instead of FNV-1a over its bytes saves
    ~7 ms per million keys, ~15% of folding a block of keys of up to 8 bytes."""
    last = kdata.shape[0] - 1
    for i in range(kstart.shape[0]):
        start = kstart[i]
        length = klen[i]
        w = np.uint64(0)
        if length <= INLINE:
            # a fixed trip count: no branch on the length
            for j in range(8):
                b = np.uint64(kdata[min(start + j, last)])
                w |= (b if j < length else np.uint64(0)) << np.uint64(8 * j)
            h = w
        else:
            h = FNV_OFFSET
            for j in range(length):
                h ^= np.uint64(kdata[start + j])
                h *= FNV_PRIME
        hashes[i] = finish_key_hash(h, np.uint64(length) * GOLDEN)
        words[i] = w


@numba.njit(cache=True, nogil=True, inline="always")
def _find(slots, mask, arena, h, kdata, start, length, w):
    # (slot, found): the key's slot, or the empty slot where it would go.
    s = h & mask
    ln = np.uint64(length)
    while True:
        meta = slots[s, 1]
        if meta == 0:
            return s, False
        if slots[s, 0] == h and ((meta >> LEN_SHIFT) & LEN_MASK) == ln:
            if length <= INLINE:
                if slots[s, 2] == w:
                    return s, True
            else:
                a = np.int64(slots[s, 2])
                same = True
                for j in range(length):
                    if arena[a + j] != kdata[start + j]:
                        same = False
                        break
                if same:
                    return s, True
        s = (s + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True, inline="always")
def _entry(rec, length, state):
    # slot word [1]: record number + 1, key length, state byte
    return np.uint64(rec + 1) | (np.uint64(length) << LEN_SHIFT) | (np.uint64(state) << STATE_SHIFT)


@numba.njit(cache=True, nogil=True, inline="always")
def _insert(slots, s, arena, arena_used, h, w, kdata, start, length, rec, state, word):
    # A new key's entry in empty slot ``s`` (a key longer than a slot holds goes to the arena);
    # returns the arena bytes used.
    if length > INLINE:
        for j in range(length):
            arena[arena_used + j] = kdata[start + j]
        w = np.uint64(arena_used)
        arena_used += length
    slots[s, 0] = h
    slots[s, 1] = _entry(rec, length, state)
    slots[s, 2] = w
    slots[s, 3] = word
    return arena_used


@numba.njit(cache=True, nogil=True, inline="always")
def _replace(slots, s, rec_state, rec, length, state, word):
    # Record ``rec`` becomes the entry of slot ``s``: the entry's record is no longer alive,
    # and its reset carries over.
    old_meta = slots[s, 1]
    rec_state[np.int64(old_meta & REC_MASK) - 1] &= NOT_ALIVE
    state |= np.uint8(old_meta >> STATE_SHIFT) & RESET
    rec_state[rec] = state
    slots[s, 1] = _entry(rec, length, state)
    slots[s, 3] = word


@numba.njit(cache=True, nogil=True, inline="always")
def _newer_wins(old_state, old_ord, new_state, new_ord):
    # hoodie_ray.merge.wins_by_state on two versions' state bits and ordering keys
    return _wins(old_state, new_state, _at_least(new_ord >= old_ord, old_state, new_state))


@numba.njit(cache=True, nogil=True)
def fold(
    slots,
    arena,
    arena_used,
    hashes,
    words,
    kdata,
    kstart,
    klen,
    first_rec,
    ords,
    rec_state,
    compares,
):
    """Fold the records of one block (record numbers ``first_rec ..``, in order) into the
    table (``hashes``, ``words``: of their keys, computed apart: in this loop the byte
    gathering stalls the table's memory accesses, 4x slower in all).

    ``ords`` holds their ordering keys (int64; unused unless ``compares``: event time with an
    ordering field), ``rec_state`` their states already (less ``ALIVE``; ``RESET`` on
    default-ordered deletes). A record of a new key becomes its entry; otherwise THE rule
    (:func:`hoodie_ray.merge.wins_by_state`) decides whether it replaces the entry (and takes
    its ``RESET``). Returns ``(new keys, arena bytes used)``.
    """
    mask = np.uint64(slots.shape[0] - 1)
    added = 0
    n = hashes.shape[0]
    for i in range(n):
        if i + PREFETCH < n:
            _prefetch_row(slots, np.int64(hashes[i + PREFETCH] & mask))
        r = first_rec + i
        h, w = hashes[i], words[i]
        start, length = kstart[i], klen[i]
        s, found = _find(slots, mask, arena, h, kdata, start, length, w)
        new = rec_state[r] | ALIVE
        word = np.uint64(ords[i]) if compares else np.uint64(0)
        if not found:
            arena_used = _insert(
                slots, s, arena, arena_used, h, w, kdata, start, length, r, new, word
            )
            rec_state[r] = new
            added += 1
        elif not compares or _newer_wins(
            np.uint8(slots[s, 1] >> STATE_SHIFT), np.int64(slots[s, 3]), new, np.int64(word)
        ):
            _replace(slots, s, rec_state, r, length, new, word)
    return added, arena_used


@numba.njit(cache=True, nogil=True)
def merge_base(
    slots,
    arena,
    hashes,
    words,
    kdata,
    kstart,
    klen,
    base_ord,
    base_state,
    rec_state,
    compares,
    keep,
):
    """Base records against the entries: ``keep[i]`` when base record ``i`` survives (no entry,
    or its entry loses: that entry is then marked consumed). ``base_ord`` / ``base_state``:
    the base records' ordering keys and their ``NULL_ORD`` / ``NAN_ORD`` bits."""
    mask = np.uint64(slots.shape[0] - 1)
    n = hashes.shape[0]
    for i in range(n):
        if i + PREFETCH < n:
            _prefetch_row(slots, np.int64(hashes[i + PREFETCH] & mask))
        start = kstart[i]
        length = klen[i]
        s, found = _find(slots, mask, arena, hashes[i], kdata, start, length, words[i])
        if not found:
            keep[i] = True
            continue
        meta = slots[s, 1]
        if not compares or _newer_wins(
            base_state[i], base_ord[i], np.uint8(meta >> STATE_SHIFT), np.int64(slots[s, 3])
        ):
            keep[i] = False
        else:
            rec_state[np.int64(meta & REC_MASK) - 1] |= CONSUMED
            keep[i] = True


@numba.njit(cache=True, nogil=True)
def rehash(old, new):
    """Move every entry of ``old`` into the empty table ``new``."""
    mask = np.uint64(new.shape[0] - 1)
    for s in range(old.shape[0]):
        if old[s, 1] != 0:
            t = old[s, 0] & mask
            while new[t, 1] != 0:
                t = (t + np.uint64(1)) & mask
            for c in range(4):
                new[t, c] = old[s, c]


# The merge rule, the key hash and its constants are compiled in from other files.
drop_stale_kernels(fold, [merge.__file__, key_hash.__file__, index_jit.__file__])
