"""64-bit perceptual hashes (DCT pHash) and corpus-wide near-duplicate search.

pHash
-----
The hash is bit-for-bit the one of ``imagehash.phash(image)`` (``hash_size=8``,
``highfreq_factor=4``), and :func:`phash_hex` is ``str(imagehash.phash(image))``, so pmcflow's
hashes can be compared with any tool that uses `imagehash <https://github.com/JohannesBuchner/imagehash>`_.
The recipe, step by step as imagehash does it: ``image.convert("L")`` (Pillow's ITU-R 601 luma),
resize to 32x32 with Pillow's LANCZOS filter, unnormalised DCT-II (``scipy.fftpack.dct``, the same
pocketfft call) along axis 0 and then axis 1, keep the 8x8 lowest frequencies, and compare each
with the median of those 64 values (DC term included).  Bit ``k`` of the hash (row-major over the
8x8 block, most significant bit first) is 1 when coefficient ``k`` is strictly above the median.
Hashes are stored as 16 lower-case hex digits; ``int(hex, 16)`` is the integer the search below
works on.  Only the parts after the DCT are pmcflow's own (a partition instead of
``numpy.median``, ``numpy.packbits`` instead of a string of bits); they perform the same
floating-point operations, so even images whose coefficients tie (flat crops, whose AC terms are
round-off) get imagehash's bits.  Resizing is most of the cost; it stays Pillow's own so that the
hashes follow imagehash on whichever Pillow is installed.

Near-duplicate search
---------------------
Two images are near-duplicates when the Hamming distance of their hashes is ``<= max_hamming``.
The search is multi-index hashing: the 64 bits are cut into 4 bands of 16 bits; by the pigeonhole
principle two hashes within distance ``d`` agree on at least one band up to ``d // 4`` bits, so
for every band the candidate partners of a hash are those whose band value lies within
``d // 4`` bits of its own (looked up in a dense 65,536-bucket table per band, all in numpy).
Exact copies are collapsed before the search, so a million copies of one blank image cost one
hash, not a million squared pairs.

Clusters are *leader* clusters, not connected components: items are visited in ascending
``subfigure_uid`` order; an item within ``max_hamming`` of an already chosen representative
becomes a duplicate of the nearest such representative (ties: smallest uid), else it becomes a
representative itself.  Every duplicate is therefore within ``max_hamming`` of its
representative (no chaining A~B~C that would drop C although C is far from A), and the result
depends only on the set of (uid, hash) pairs, never on chunk order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image
from scipy.fftpack import dct

HASH_SIZE = 8  # 8x8 low-frequency block -> 64 bits (imagehash's hash_size)
N_BITS = HASH_SIZE * HASH_SIZE
IMG_SIZE = 32  # DCT input side (hash_size * imagehash's highfreq_factor 4)
N_BANDS = 4
BAND_BITS = 16

_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


# ----------------------------------------------------------------------------------------------
# hashing
# ----------------------------------------------------------------------------------------------


def phash_int(image: Image.Image) -> int:
    """The 64-bit DCT perceptual hash of ``image`` as an unsigned int (``imagehash.phash``'s bits)."""
    grey = image if image.mode == "L" else image.convert("L")
    small = grey.resize((IMG_SIZE, IMG_SIZE), Image.Resampling.LANCZOS)
    pixels = np.asarray(small, dtype=np.float64)  # what scipy.fftpack makes of imagehash's uint8
    coeffs = dct(dct(pixels, axis=0), axis=1)[:HASH_SIZE, :HASH_SIZE].ravel()
    # numpy.median of an even count: the mean of the two middle values, (lo + hi) / 2 in float64
    mid = N_BITS // 2
    part = np.partition(coeffs, (mid - 1, mid))
    median = (part[mid - 1] + part[mid]) / 2
    return int.from_bytes(np.packbits(coeffs > median).tobytes(), "big")


def phash_hex(image: Image.Image) -> str:
    """:func:`phash_int` as 16 lower-case hex digits, the same string as ``str(imagehash.phash(image))``."""
    return f"{phash_int(image):016x}"


def hex_to_uint64(values: Iterable[str]) -> np.ndarray:
    return np.array([int(v, 16) for v in values], dtype=np.uint64)


def popcount64(x: np.ndarray) -> np.ndarray:
    """Number of set bits of each uint64."""
    as_bytes = np.ascontiguousarray(x, dtype=np.uint64).view(np.uint8).reshape(-1, 8)
    return _POPCOUNT8[as_bytes].sum(axis=1, dtype=np.int64)


def hamming(a: str | int, b: str | int) -> int:
    """Hamming distance of two hashes (hex strings or ints)."""
    ia = int(a, 16) if isinstance(a, str) else int(a)
    ib = int(b, 16) if isinstance(b, str) else int(b)
    return (ia ^ ib).bit_count()


# ----------------------------------------------------------------------------------------------
# candidate pairs by multi-index hashing
# ----------------------------------------------------------------------------------------------


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy's hash-based unique is very slow on wide 64-bit keys)."""
    if a.size == 0:
        return a
    b = np.sort(a, kind="stable")
    keep = np.empty(b.size, dtype=bool)
    keep[0] = True
    np.not_equal(b[1:], b[:-1], out=keep[1:])
    return b[keep]


def _group_identical(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(unique values, inverse)`` like ``np.unique(h, return_inverse=True)``, by sorting."""
    order = np.argsort(h, kind="stable")
    b = h[order]
    new = np.empty(b.size, dtype=bool)
    if b.size:
        new[0] = True
        np.not_equal(b[1:], b[:-1], out=new[1:])
    group = np.cumsum(new) - 1
    inverse = np.empty(h.size, dtype=np.int64)
    inverse[order] = group
    return b[new], inverse


def _band_masks(radius: int) -> np.ndarray:
    """All 16-bit XOR masks with at most ``radius`` bits set (0 first)."""
    masks = [m for m in range(1 << BAND_BITS) if m.bit_count() <= radius]
    return np.array(sorted(masks, key=lambda m: (m.bit_count(), m)), dtype=np.uint64)


def near_pairs(hashes: np.ndarray, max_hamming: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All index pairs ``(i, j)``, ``i < j``, of distinct positions with distance <= ``max_hamming``.

    ``hashes`` should hold unique values (exact copies are cheaper to group beforehand).
    Returns ``(i, j, distance)`` arrays sorted by ``(i, j)``.
    """
    h = np.ascontiguousarray(hashes, dtype=np.uint64)
    n = h.size
    empty = np.zeros(0, dtype=np.int64)
    if n < 2 or max_hamming < 0:
        return empty, empty, empty
    if max_hamming >= 4 * BAND_BITS // 2:
        raise ValueError(f"max_hamming={max_hamming} is far too large for a 64-bit hash")
    masks = _band_masks(max_hamming // N_BANDS)
    found_i: list[np.ndarray] = []
    found_j: list[np.ndarray] = []
    for band in range(N_BANDS):
        shift = np.uint64(BAND_BITS * band)
        keys = ((h >> shift) & np.uint64(0xFFFF)).astype(np.int64)
        # a dense bucket table: items of band value v are order[start[v] : start[v] + count[v]]
        order = np.argsort(keys, kind="stable")
        count = np.bincount(keys, minlength=1 << BAND_BITS)
        start = np.concatenate(([0], np.cumsum(count)[:-1]))
        for mask in masks.astype(np.int64):
            q = keys ^ mask
            cnt = count[q]
            total = int(cnt.sum())
            if total == 0:
                continue
            qi = np.repeat(np.arange(n, dtype=np.int64), cnt)
            # positions start[q] .. start[q] + cnt[q] - 1 for every query, flattened
            offsets = np.repeat(start[q] - (np.cumsum(cnt) - cnt), cnt)
            qj = order[offsets + np.arange(total, dtype=np.int64)]
            keep = qi < qj
            found_i.append(qi[keep])
            found_j.append(qj[keep])
    if not found_i:
        return empty, empty, empty
    code = sorted_unique(np.concatenate(found_i) * n + np.concatenate(found_j))
    ii, jj = code // n, code % n
    dist = popcount64(h[ii] ^ h[jj])
    keep = dist <= max_hamming
    return ii[keep], jj[keep], dist[keep]


# ----------------------------------------------------------------------------------------------
# clustering
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Duplicate:
    subfigure_uid: str
    duplicate_of: str
    distance: int


def cluster_duplicates(uids: Sequence[str], hashes: np.ndarray, max_hamming: int) -> list[Duplicate]:
    """Leader clustering (see the module docstring).  Returns one row per non-representative.

    ``uids`` must be unique.  The result is sorted by ``subfigure_uid``.
    """
    if len(uids) != len(hashes):
        raise ValueError("uids and hashes differ in length")
    if len(set(uids)) != len(uids):
        raise ValueError("subfigure_uid values are not unique")
    n = len(uids)
    if n < 2:
        return []
    order = sorted(range(n), key=lambda k: uids[k])
    rank = np.empty(n, dtype=np.int64)
    rank[np.array(order, dtype=np.int64)] = np.arange(n, dtype=np.int64)
    h = np.asarray(hashes, dtype=np.uint64)

    # Group exact copies: one node per distinct hash; its members in uid order.
    uniq, inverse = _group_identical(h)
    members: list[list[int]] = [[] for _ in range(uniq.size)]
    for k in order:
        members[int(inverse[k])].append(k)

    ii, jj, dd = near_pairs(uniq, max_hamming)
    neighbours: list[list[tuple[int, int]]] = [[] for _ in range(uniq.size)]
    for a, b, d in zip(ii.tolist(), jj.tolist(), dd.tolist(), strict=True):
        neighbours[a].append((b, d))
        neighbours[b].append((a, d))

    out: list[Duplicate] = []
    leader_of_node: dict[int, int] = {}  # distinct-hash node -> item index of its representative
    # Visit distinct hashes in order of their smallest uid; within a node, later members are
    # exact copies of the node's first member (or of the leader that claimed the node).
    node_order = sorted(range(uniq.size), key=lambda u: rank[members[u][0]])
    for u in node_order:
        best: tuple[int, int, int] | None = None  # (distance, rank of leader, leader item)
        for v, d in neighbours[u]:
            lead = leader_of_node.get(v)
            if lead is None or members[v][0] != lead:
                continue  # v is not itself a representative
            cand = (d, int(rank[lead]), lead)
            if best is None or cand < best:
                best = cand
        first = members[u][0]
        if best is None:
            leader_of_node[u] = first
            leader = first
            dist_first = 0
        else:
            leader = best[2]
            dist_first = best[0]
            leader_of_node[u] = leader
            out.append(Duplicate(uids[first], uids[leader], dist_first))
        for k in members[u][1:]:
            out.append(Duplicate(uids[k], uids[leader], dist_first))
    out.sort(key=lambda r: r.subfigure_uid)
    return out
