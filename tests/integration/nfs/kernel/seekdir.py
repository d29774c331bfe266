#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# telldir/seekdir on the kernel client, in the manner of Connectathon's
# special tests: read a directory with readdir(3), remembering telldir(3)
# before each entry, then seekdir(3) back to each remembered position (in
# reverse order, then after the page cache was dropped) and check readdir
# returns the same name again. The kernel uses READDIR cookies as directory
# offsets; a cookie with its top bit set is a negative offset, seekdir's
# lseek fails (silently) and readdir then returns nothing.
import ctypes
import ctypes.util
import os
import sys

B = f"kseekdir-{os.getpid()}"
N = 600  # long names: several READDIRPLUS pages


class Dirent(ctypes.Structure):  # glibc x86_64 struct dirent
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_uint16), ("d_type", ctypes.c_uint8),
                ("d_name", ctypes.c_char * 256)]


libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.opendir.restype = ctypes.c_void_p
libc.opendir.argtypes = [ctypes.c_char_p]
libc.readdir.restype = ctypes.POINTER(Dirent)
libc.readdir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.telldir.argtypes = [ctypes.c_void_p]
libc.seekdir.restype = None
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.closedir.argtypes = [ctypes.c_void_p]


def fail(step, msg):
    print(f"FAIL [{step}]: {msg}", flush=True)
    sys.exit(1)


def next_name(d):
    ctypes.set_errno(0)
    e = libc.readdir(d)
    if not e:
        err = ctypes.get_errno()
        return None if err == 0 else f"<errno {err}: {os.strerror(err)}>"
    return e.contents.d_name.decode()


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


os.mkdir(B)
names = {f"{i:04d}-" + "n" * 150 for i in range(N)}
for n in names:
    with open(os.path.join(B, n), "w") as f:
        f.write("x")
path = os.path.join(os.getcwd(), B).encode()

d = libc.opendir(path)
if not d:
    fail("opendir", os.strerror(ctypes.get_errno()))
seen = []  # (telldir before the entry, its name)
while True:
    pos = libc.telldir(d)
    if pos < 0:
        fail("telldir", f"telldir returned {pos} after {len(seen)} entries "
             f"(errno {ctypes.get_errno()})")
    name = next_name(d)
    if name is None:
        break
    if name.startswith("<"):
        fail("readdir", name)
    seen.append((pos, name))
got = {n for _, n in seen} - {".", ".."}
if got != names:
    fail("readdir", f"{len(got)} names read, {len(names)} made; missing "
         f"{sorted(names - got)[:3]}, extra {sorted(got - names)[:3]}")
print(f"read {len(seen)} entries; offsets {seen[2][0]:#x} .. {seen[-1][0]:#x}", flush=True)

# Back to every position, last first: each gives the same entry again.
for pos, name in reversed(seen):
    libc.seekdir(d, pos)
    again = next_name(d)
    if again != name:
        fail("seekdir back", f"seekdir({pos:#x}) then readdir gave {again!r}, want {name!r}")
libc.closedir(d)

# The same positions in a new stream after the caches were dropped: the
# client asks the server to resume from those cookies.
drop_caches()
d = libc.opendir(path)
for pos, name in seen[::7] + seen[-3:]:
    libc.seekdir(d, pos)
    again = next_name(d)
    if again != name:
        fail("seekdir cold", f"seekdir({pos:#x}) then readdir gave {again!r}, want {name!r}")
    if libc.telldir(d) < 0:
        fail("seekdir cold", "negative telldir")
libc.closedir(d)

for n in names:
    os.unlink(os.path.join(B, n))
os.rmdir(B)
print("SEEKDIR OK", flush=True)
