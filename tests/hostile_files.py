"""Data files that attack whoever reads them: a `.npz` whose deflated members expand a
thousandfold, written without ever holding what they expand to."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHUNK = 4 * 2**20  # zeros deflated at a time: each full-flushed chunk deflates alike
_ZIP64 = 0xFFFFFFFF


@dataclass(frozen=True)
class Zeros:
    """An array of zeros of `shape` and `dtype`, never made: its member streams them."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=object)) * np.dtype(self.dtype).itemsize


def write_npz(path: Path, arrays: Mapping[str, np.ndarray | Zeros]) -> None:
    """Writes an `.npz` whose members are deflated, as `np.savez_compressed` writes them;
    a `Zeros` member's data is deflated once per `CHUNK` and repeated, so that 4 GB of it
    costs seconds and a few megabytes of disk (ZIP64 headers, as NumPy writes them)."""
    directory = b""
    with path.open("wb") as file:
        for key, array in arrays.items():
            offset = file.tell()
            name = f"{key}.npy".encode()
            if isinstance(array, Zeros):
                header = _npy_header(array.shape, array.dtype)
                pieces, crc, size = _deflated_zeros(header, array.nbytes)
            else:
                npy = io.BytesIO()
                np.lib.format.write_array(npy, np.asarray(array), allow_pickle=False)
                pieces, crc, size = _deflated_zeros(npy.getvalue(), 0)
            compressed = sum(len(piece) * count for piece, count in pieces)
            local = struct.pack(
                "<IHHHHHIIIHH", 0x04034B50, 45, 0, 8, 0, 0x21, crc, _ZIP64, _ZIP64, len(name), 20
            )
            file.write(local + name + struct.pack("<HHQQ", 1, 16, size, compressed))
            for piece, count in pieces:
                for _ in range(count):
                    file.write(piece)
            central = struct.pack(
                "<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 8, 0, 0x21, crc, _ZIP64, _ZIP64,
                len(name), 28, 0, 0, 0, 0, _ZIP64,
            )  # fmt: skip
            directory += central + name + struct.pack("<HHQQQ", 1, 24, size, compressed, offset)
        start = file.tell()
        file.write(directory)
        end64 = file.tell()
        count = len(arrays)
        file.write(
            struct.pack(
                "<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(directory), start
            )
        )
        file.write(struct.pack("<IIQI", 0x07064B50, 0, end64, 1))
        file.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, _ZIP64, _ZIP64, 0))


def _npy_header(shape: tuple[int, ...], dtype: str) -> bytes:
    header = io.BytesIO()
    fields = {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(header, fields)
    return header.getvalue()


def _deflated_zeros(prefix: bytes, zeros: int) -> tuple[list[tuple[bytes, int]], int, int]:
    """The raw deflate stream of `prefix` then `zeros` zero bytes, as (piece, times) in
    order; and the data's CRC-32 and size."""
    chunks, rest = divmod(zeros, CHUNK)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.compress(bytes(rest)) + compressor.flush()
    # A full flush ends a stretch that refers to nothing before it, and the next starts
    # afresh: the chunks of zeros, each deflated alike, fit in between.
    chunk = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = chunk.compress(bytes(CHUNK)) + chunk.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(prefix)
    zero_chunk = bytes(CHUNK)
    for _ in range(chunks):
        crc = zlib.crc32(zero_chunk, crc)
    crc = zlib.crc32(bytes(rest), crc)
    return [(head, 1), (block, chunks), (tail, 1)], crc, len(prefix) + zeros
