#!/usr/bin/env python3
"""Pull the plug: roll the files watched by powerloss_shim back to their last-synced state.

    powerloss.py rollback JOURNAL DIR     (every process that wrote under DIR must be dead: SIGKILL)

Reads the undo journal (format: powerloss_shim.c), keeps per path only the records after the
path's last S (synced) or U (unlinked) record, and applies them in reverse journal order: a W
record puts the overwritten bytes back and the old size, a T record the old size and the cut-off
bytes. Then deletes every -shm file under DIR (a reboot loses shared memory; SQLite rebuilds it
from the WAL). Records torn by a SIGKILL during their own append are skipped (the write they
describe never happened). Prints one summary line. Also importable (rollback()).
"""
import os
import struct
import sys
import zlib

MAGIC = 0x53534F4C52574F50
HEADER = struct.Struct("<QII B3x i q q I I")  # magic total hash type pid offset old_size path_len data_len
HASHED_FROM = 16  # offsetof(type)




def read_journal(path):
    """The journal's records in order, as (type, path, offset, old_size, data); and the torn count."""
    with open(path, "rb") as f:
        buf = f.read()
    magic = struct.pack("<Q", MAGIC)
    out, torn, p = [], 0, 0
    while p + HEADER.size <= len(buf):
        if buf[p:p + 8] != magic:
            q = buf.find(magic, p + 1)
            torn += 1
            if q < 0:
                break
            p = q
            continue
        _, total, h, typ, _pid, off, old, plen, dlen = HEADER.unpack_from(buf, p)
        ok = (total == HEADER.size + plen + dlen and p + total <= len(buf)
              and zlib.crc32(buf[p + HASHED_FROM:p + total]) == h)
        if not ok:
            torn += 1
            q = buf.find(magic, p + 1)
            if q < 0:
                break
            p = q
            continue
        name = buf[p + HEADER.size:p + HEADER.size + plen].decode()
        data = buf[p + HEADER.size + plen:p + total]
        out.append((chr(typ), name, off, old, data))
        p += total
    return out, torn


def rollback(journal, directory):
    recs, torn = read_journal(journal) if os.path.exists(journal) else ([], 0)
    last_durable = {}
    for i, (typ, name, *_rest) in enumerate(recs):
        if typ in "SU":
            last_durable[name] = i
    undone, files = 0, set()
    for i in range(len(recs) - 1, -1, -1):
        typ, name, off, old, data = recs[i]
        if typ not in "WT" or i < last_durable.get(name, -1):
            continue
        if not os.path.exists(name):
            continue  # unlinked after this write (U is treated as durable at once)
        fd = os.open(name, os.O_RDWR)
        try:
            if typ == "W":
                os.ftruncate(fd, old)
                if data:
                    os.pwrite(fd, data, off)
            else:  # T: off is the new size
                os.ftruncate(fd, old)
                if data:
                    os.pwrite(fd, data, off)
        finally:
            os.close(fd)
        undone += 1
        files.add(os.path.basename(name))
    shm = 0
    for root, _dirs, names in os.walk(directory):
        for n in names:
            if n.endswith("-shm"):
                os.unlink(os.path.join(root, n))
                shm += 1
    syncs = sum(1 for r in recs if r[0] == "S")
    print(f"powerloss: records={len(recs)} syncs={syncs} undone={undone} files={sorted(files)} "
          f"torn={torn} shm_removed={shm}", flush=True)
    return undone


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "rollback":
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    rollback(sys.argv[2], sys.argv[3])
