"""Reading the arrays of a `.npz` in bounded memory: every header first, then each array.

`np.load` expands each member in full, and deflate shrinks zeros about 1000:1, so a 4 MB
file can ask for 4 GB. Here the zip's directory and each member's `.npy` header (shape,
dtype) are read first, without the data: `open_archive` refuses a directory of more than
`MAX_DIRECTORY_BYTES` or `MAX_MEMBERS` entries, and `headers` a member neither stored nor
deflated, or one whose declared size is not its header's plus its shape times its item
size. The caller then judges the shapes and sizes, and `read` fills an array of exactly
the declared size from a stream that ends there (and compares the checksum there).

Every error names a member by the key it stands for (`x_train`), or by its position in
the archive, and never quotes what the file holds: the file may be someone else's.
"""

from __future__ import annotations

import math
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

#: The most entries an archive may have, and the most bytes its directory may take.
MAX_MEMBERS = 64
MAX_DIRECTORY_BYTES = 2**16
#: The bytes of a member decompressed at a time.
READ_CHUNK = 16 * 2**20
#: The methods an entry may use (`np.savez`, `np.savez_compressed`).
METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
# What reading a broken archive or member raises, whose messages may quote the file:
# a damaged entry, or data that fails its checksum; and anything else.
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError)
_BROKEN = (*_DAMAGED, ValueError, OSError, RecursionError)


class BadArchive(ValueError):
    """An archive or member the lab does not read; the message quotes none of its content."""


@dataclass(frozen=True)
class Member:
    """One array of the archive, known from its header.

    Attributes:
        key: What `np.load` calls it: its name without `.npy`.
        info: Its entry in the zip's directory.
        shape, dtype, fortran_order: What its `.npy` header declares.
        data_offset: Where its data begins, after the header.
    """

    key: str
    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    data_offset: int

    @property
    def count(self) -> int:
        """How many items it holds."""
        return math.prod(self.shape)


def open_archive(file: BinaryIO) -> zipfile.ZipFile:
    """`file` as a zip archive, whose directory is parsed only once it is known to take
    at most `MAX_DIRECTORY_BYTES` (an object per entry: a 200 MB directory of empty
    entries would take gigabytes). Raises `BadArchive`."""
    try:
        # The function ZipFile reads the end record with: the size judged is the size
        # it then parses.
        end = zipfile._EndRecData(file)
        if end is not None and end[zipfile._ECD_SIZE] > MAX_DIRECTORY_BYTES:
            raise BadArchive(
                f"the archive's directory takes {end[zipfile._ECD_SIZE]:,} bytes; "
                f"a .npz's takes at most {MAX_DIRECTORY_BYTES:,}"
            )
        archive = zipfile.ZipFile(file)
    except BadArchive:
        raise
    except _BROKEN:
        raise BadArchive("not a zip archive (np.savez writes one)") from None
    if len(archive.infolist()) > MAX_MEMBERS:
        archive.close()
        raise BadArchive(f"the archive has more than {MAX_MEMBERS} entries")
    return archive


def headers(archive: zipfile.ZipFile, keys: tuple[str, ...]) -> dict[str, Member]:
    """The members named by `keys` (`x_train` for `x_train.npy`) that the archive has,
    from their headers alone. Raises `BadArchive`."""
    members = archive.infolist()
    for index, info in enumerate(members, 1):
        if info.compress_type not in METHODS:
            raise BadArchive(
                f"member {index} of the archive is compressed with method "
                f"{info.compress_type}; only stored and deflated members are read"
            )
    by_key = {info.filename.removesuffix(".npy"): info for info in members}
    return {key: _header(archive, key, by_key[key]) for key in keys if key in by_key}


def read(archive: zipfile.ZipFile, member: Member) -> np.ndarray:
    """The array of `member`, read in chunks of `READ_CHUNK` into memory of exactly its
    size (the stream ends at the declared size, which its header agrees with). Raises
    `BadArchive` for data that is short or fails its checksum."""
    size = member.count * member.dtype.itemsize
    buffer = bytearray(size)
    view = memoryview(buffer)
    try:
        with archive.open(member.info) as stream:
            stream.seek(member.data_offset)
            done = 0
            while done < size:  # the last bytes read, zipfile compares the checksum
                got = stream.readinto(view[done : done + READ_CHUNK])
                if not got:
                    raise BadArchive(f"{member.key}.npy ends before its data does")
                done += got
    except BadArchive:
        raise
    except _BROKEN:
        raise BadArchive(_damaged(member.key)) from None
    array = np.frombuffer(buffer, dtype=member.dtype)
    return array.reshape(member.shape, order="F" if member.fortran_order else "C")


def _header(archive: zipfile.ZipFile, key: str, info: zipfile.ZipInfo) -> Member:
    try:
        with archive.open(info) as stream:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
            elif version == (2, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
            else:
                raise BadArchive(f"{key}.npy is a .npy of version {version}; 1.0 and 2.0 are read")
            header_size = stream.tell()
    except BadArchive:
        raise
    except _DAMAGED:  # a small member is read whole, and its checksum compared, at once
        raise BadArchive(_damaged(key)) from None
    except _BROKEN:
        raise BadArchive(f"{key}.npy is not a .npy array numpy can read") from None
    if dtype.hasobject:
        raise BadArchive(f"{key}.npy holds Python objects, which the lab never unpickles")
    if any(size < 0 for size in shape):
        raise BadArchive(f"{key}.npy declares a negative size in its shape {shape}")
    member = Member(key, info, tuple(shape), dtype, fortran_order, header_size)
    expected = header_size + member.count * dtype.itemsize
    if info.file_size != expected:
        raise BadArchive(
            f"{key}.npy declares {info.file_size:,} bytes; its header, shape {member.shape} "
            f"of {dtype}, makes {expected:,}"
        )
    return member


def _damaged(key: str) -> str:
    return f"{key}.npy is damaged (its entry, its data or their checksum)"
