"""The guest kernel uncompressed, for QEMU's PVH entry: under TCG it saves the decompressor's seconds of every boot.

Debian's kernel is a bzImage: real-mode setup code, then a decompressor, then the kernel itself compressed with
xz. Emulated, the decompressor took 4.3 s of every boot here (QEMU's start to the kernel's first line: 4.7 s
from the bzImage, 0.36 s from the uncompressed kernel). The uncompressed kernel is an ELF file whose Xen note
PHYS32_ENTRY names an entry point that QEMU's `-kernel` jumps to directly (the PVH boot protocol). The image
build writes it beside the bzImage it came from; a boot uses it if it is there.
"""

from __future__ import annotations

import lzma
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


def uncompressed(bzimage: Path) -> Path:
    """Where the kernel of `bzimage` is kept uncompressed: beside it, vmlinuz-X as vmlinux-X."""
    return bzimage.with_name(bzimage.name.replace("vmlinuz", "vmlinux", 1))


def kernel_for(bzimage: Path, pvh_boot: bool) -> Path:
    """The kernel QEMU starts: the uncompressed one where a PVH boot is wanted and the image has it."""
    return uncompressed(bzimage) if pvh_boot and uncompressed(bzimage).is_file() else bzimage


def write_uncompressed(bzimage: Path) -> bool:
    """Write the kernel of `bzimage` uncompressed (at `uncompressed(bzimage)`), for the image build; False when
    it has no xz payload or no PVH entry, and its guests boot the bzImage."""
    data = bzimage.read_bytes()
    start = data.find(XZ_MAGIC)
    if start < 0:
        return False
    try:
        elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:])
        if not has_pvh_entry(elf):
            return False
    except (lzma.LZMAError, struct.error):  # not xz after all, or an ELF file cut short
        return False
    uncompressed(bzimage).write_bytes(elf)
    return True
