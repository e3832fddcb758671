"""The guest kernel uncompressed, for QEMU's PVH entry: under TCG it saves the decompressor's seconds of every boot.

Debian's kernel is a bzImage: real-mode setup code, then a decompressor, then the kernel itself compressed with
xz. Emulated, the decompressor took 4.3 s of every boot here (QEMU's start to the kernel's first line: 4.7 s
from the bzImage, 0.36 s from the uncompressed kernel). The uncompressed kernel is an ELF file whose Xen note
PHYS32_ENTRY names an entry point that QEMU's `-kernel` jumps to directly (the PVH boot protocol). It is
written once per image, beside the bzImage it came from.
"""

from __future__ import annotations

import lzma
import os
import struct
from pathlib import Path

XZ_MAGIC = b"\xfd7zXZ\x00"
PT_NOTE = 4
XEN_ELFNOTE_PHYS32_ENTRY = 18


def has_pvh_entry(elf: bytes) -> bool:
    """Whether `elf` is a 64-bit little-endian ELF file with the Xen note that QEMU's PVH boot looks for."""
    if elf[:6] != b"\x7fELF\x02\x01":
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for header in range(phoff, phoff + phentsize * phnum, phentsize):
        kind, = struct.unpack_from("<I", elf, header)
        offset, = struct.unpack_from("<Q", elf, header + 8)
        size, = struct.unpack_from("<Q", elf, header + 32)
        if kind == PT_NOTE and _has_note(elf[offset:offset + size], b"Xen\0", XEN_ELFNOTE_PHYS32_ENTRY):
            return True
    return False


def _has_note(notes: bytes, name: bytes, kind: int) -> bool:
    """Whether the notes (each: name size, description size, type, then name and description padded to 4)
    hold one of this name and type."""
    at = 0
    while at + 12 <= len(notes):
        name_size, desc_size, note_kind = struct.unpack_from("<III", notes, at)
        if note_kind == kind and notes[at + 12:at + 12 + name_size] == name:
            return True
        at += 12 + (name_size + 3) // 4 * 4 + (desc_size + 3) // 4 * 4
    return False


def uncompressed(bzimage: Path) -> Path | None:
    """The kernel in `bzimage` uncompressed beside it (vmlinuz-X becomes vmlinux-X), written the first time; None
    when it cannot be (no xz payload, no PVH entry, a folder this user may not write), so the bzImage boots."""
    target = bzimage.with_name(bzimage.name.replace("vmlinuz", "vmlinux", 1))
    if target.is_file():
        return target
    data = bzimage.read_bytes()
    start = data.find(XZ_MAGIC)
    if start < 0:
        return None
    try:
        elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:])
    except lzma.LZMAError:
        return None
    if not has_pvh_entry(elf):
        return None
    partial = target.with_name(f".{target.name}.{os.getpid()}")  # two boots at once: each renames a whole file
    try:
        partial.write_bytes(elf)
        partial.replace(target)
    except OSError:
        partial.unlink(missing_ok=True)
        return None
    return target
