# SPDX-License-Identifier: Apache-2.0
"""Hostile ELF files for the agent's hostile-neighbour tests (docs/security.md),
written by hand with struct so each is exactly the attack it names:

- zlib_bomb(): a 1.4 MB x86-64 ELF whose one section, a compressed
  (SHF_COMPRESSED, ELFCOMPRESS_ZLIB) .debug_frame, really inflates to the
  1.5 GB its Chdr declares.
- sparse_note(): a sparse file with one PT_NOTE at a misaligned offset
  declaring 1 GiB (libelf's elf_getdata_rawchunk() copies a misaligned chunk
  whole).

Both have a PT_LOAD over their first page, so a process can map that page
executable and the agent will read the file. tests/fuzz/corpus/unwind-table/
zlib-bomb-debug-frame is zlib_bomb(path, 60 * 1000 * 1000): the same attack
under the fuzzers' 64 KiB input size.

  hostile_files.py zlib|note OUT   writes one (to measure an agent by hand)
"""
import os
import struct
import zlib

PAGE = 4096
EHDR = 64
PHDR = 56
SHDR = 64


def _ehdr(phoff, phnum, shoff, shnum, shstrndx):
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    # ET_DYN, EM_X86_64, EV_CURRENT
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, shoff, 0, EHDR, PHDR, phnum, SHDR,
                               shnum, shstrndx)


def _phdr(p_type, flags, offset, vaddr, filesz, memsz, align):
    return struct.pack("<IIQQQQQQ", p_type, flags, offset, vaddr, vaddr, filesz, memsz, align)


def _shdr(name, sh_type, flags, addr, offset, size, link=0, info=0, align=1, entsize=0):
    return struct.pack("<IIQQQQIIQQ", name, sh_type, flags, addr, offset, size, link, info, align, entsize)


def zlib_bomb(path, inflated=1536 * 1000 * 1000):
    """Returns the compressed size. Compressing 1.5 GB of zeros takes a few seconds."""
    z = zlib.compressobj(9)
    chunk = bytes(16 << 20)
    parts = []
    left = inflated
    while left:
        n = min(left, len(chunk))
        parts.append(z.compress(chunk[:n]))
        left -= n
    parts.append(z.flush())
    stream = b"".join(parts)
    # Elf64_Chdr: ch_type ELFCOMPRESS_ZLIB, reserved, ch_size, ch_addralign
    sec = struct.pack("<IIQQ", 1, 0, inflated, 8) + stream
    shstr = b"\0.shstrtab\0.debug_frame\0"
    sec_off = PAGE
    shstr_off = sec_off + len(sec)
    shoff = (shstr_off + len(shstr) + 7) & ~7
    with open(path, "wb") as f:
        f.write(_ehdr(EHDR, 1, shoff, 3, 1))
        f.write(_phdr(1, 5, 0, 0, PAGE, PAGE, PAGE))  # PT_LOAD R+X over the first page
        f.seek(sec_off)
        f.write(sec)
        f.write(shstr)
        f.seek(shoff)
        f.write(_shdr(0, 0, 0, 0, 0, 0))
        f.write(_shdr(1, 3, 0, 0, shstr_off, len(shstr)))
        # SHT_PROGBITS, SHF_COMPRESSED (0x800)
        f.write(_shdr(11, 1, 0x800, 0, sec_off, len(sec), align=8))
    return len(stream)


def sparse_note(path, size=1 << 30, note_off=PAGE + 2):
    """A file of size + a page, all hole but its headers; its PT_NOTE at note_off (not 4-aligned)."""
    with open(path, "wb") as f:
        f.write(_ehdr(EHDR, 2, 0, 0, 0))
        f.write(_phdr(1, 5, 0, 0, PAGE, PAGE, PAGE))
        f.write(_phdr(4, 4, note_off, 0, size, size, 4))  # PT_NOTE
        f.truncate(note_off + size)


if __name__ == "__main__":
    import sys
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "zlib":
        print(zlib_bomb(out))
    elif kind == "note":
        sparse_note(out)
    else:
        raise SystemExit("usage: hostile_files.py zlib|note OUT")
