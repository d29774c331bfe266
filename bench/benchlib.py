# SPDX-License-Identifier: Apache-2.0
"""bench/benchlib.py: helpers the Python benches share.

- size_arg: "256M" -> bytes (argparse type);
- admin: one admin API call of a tests/integration Daemon;
- Body, http_conn, http_do: S3 over presigned URLs and keep-alive connections,
  the client costing little (bench/qos, bench/ai);
- NfsLib, Nfs: the libnfs sync API through ctypes, one context (connection) per
  object; a pread/pwrite larger than the server's rsize/wsize goes out as several
  READs/WRITEs in flight at once (bench/soak, bench/ai).
"""
import ctypes
import ctypes.util
import http.client
import json
import os
import time
import urllib.parse
import urllib.request

KiB, MiB = 1 << 10, 1 << 20


def size_arg(s):
    mult = {"K": KiB, "M": MiB, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def admin(d, method, path, body=None):
    req = urllib.request.Request(d.admin_endpoint + "/api/v1" + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {d.admin_token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


class Body:
    """A request body of @p size bytes made of @p data repeated, read as it is
    sent: no copy of the whole object is built (a 256 MiB body took seconds of
    memcpy and page faults under the GIL, inside the writer's timed window)."""

    def __init__(self, data, size):
        self.data, self.size, self.pos = memoryview(data), size, 0

    def seek(self, pos):
        self.pos = pos

    def read(self, n=-1):
        left = self.size - self.pos
        if n < 0 or n > left:
            n = left
        off = self.pos % len(self.data)
        chunk = self.data[off:off + min(n, len(self.data) - off)]
        self.pos += len(chunk)
        return chunk


def http_conn(netloc):
    return http.client.HTTPConnection(netloc, timeout=120, blocksize=256 * KiB)


def http_do(conns, url, method="GET", body=None):
    """One request on a keep-alive connection per host:port; @return the body's length."""
    u = urllib.parse.urlsplit(url)
    c = conns.get(u.netloc)
    if c is None:
        c = conns[u.netloc] = http_conn(u.netloc)
    path = u.path + ("?" + u.query if u.query else "")
    hdrs = {"Content-Length": str(body.size)} if isinstance(body, Body) else {}
    for attempt in range(5):
        try:
            if isinstance(body, Body):
                body.seek(0)
            c.request(method, path, body=body, headers=hdrs)
            r = c.getresponse()
            data = r.read()
            if r.status == 503:  # SlowDown: QoS asked us to come back
                time.sleep(0.05 * (attempt + 1))
                continue
            if r.status >= 300:
                raise RuntimeError(f"{method} {u.path}: HTTP {r.status} {data[:200]!r}")
            return len(data)
        except (http.client.HTTPException, ConnectionError):
            c.close()
            c = conns[u.netloc] = http_conn(u.netloc)
    raise RuntimeError(f"{method} {u.path}: throttled 5 times")


# ---- libnfs (sync API through ctypes)

class NfsLib:
    """The few libnfs sync calls the soak uses, through ctypes."""

    def __init__(self):
        name = ctypes.util.find_library("nfs")
        if not name:
            raise RuntimeError("libnfs not found (apt-get install libnfs-dev)")
        L = self.L = ctypes.CDLL(name)
        vp, cp, c_int, u64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint64
        L.nfs_init_context.restype = vp
        L.nfs_destroy_context.argtypes = [vp]
        L.nfs_get_error.restype = cp
        L.nfs_get_error.argtypes = [vp]
        L.nfs_set_timeout.argtypes = [vp, c_int]
        L.nfs_parse_url_dir.restype = vp
        L.nfs_parse_url_dir.argtypes = [vp, cp]
        L.nfs_destroy_url.argtypes = [vp]
        L.nfs_mount.argtypes = [vp, cp, cp]
        L.nfs_create.argtypes = [vp, cp, c_int, c_int, ctypes.POINTER(vp)]
        L.nfs_open.argtypes = [vp, cp, c_int, ctypes.POINTER(vp)]
        L.nfs_close.argtypes = [vp, vp]
        L.nfs_pwrite.argtypes = [vp, vp, u64, u64, cp]
        L.nfs_pread.argtypes = [vp, vp, u64, u64, ctypes.c_void_p]
        L.nfs_fsync.argtypes = [vp, vp]
        L.nfs_unlink.argtypes = [vp, cp]
        L.nfs_rename.argtypes = [vp, cp, cp]
        L.nfs_mkdir.argtypes = [vp, cp]
        L.nfs_rmdir.argtypes = [vp, cp]
        L.nfs_stat64.argtypes = [vp, cp, ctypes.c_void_p]
        L.nfs_opendir.argtypes = [vp, cp, ctypes.POINTER(vp)]
        L.nfs_readdir.restype = ctypes.POINTER(NfsDirent)
        L.nfs_readdir.argtypes = [vp, vp]
        L.nfs_closedir.argtypes = [vp, vp]


class NfsDirent(ctypes.Structure):
    # Only the first two fields are read (next, name): their layout is stable.
    _fields_ = [("next", ctypes.c_void_p), ("name", ctypes.c_char_p)]


class NfsError(Exception):
    pass


class Nfs:
    def __init__(self, lib, port):
        self.L = lib.L
        self.ctx = self.L.nfs_init_context()
        if not self.ctx:
            raise NfsError("nfs_init_context failed")
        # The URL's arguments set the version and both ports (this libnfs has
        # no nfs_set_nfsport); the URL itself is not needed afterwards.
        url = self.L.nfs_parse_url_dir(self.ctx, (
            "nfs://127.0.0.1/?version=3&nfsport=%d&mountport=%d" % (port, port)).encode())
        if not url:
            err = self.L.nfs_get_error(self.ctx).decode(errors="replace")
            self.close()
            raise NfsError("nfs_parse_url_dir: " + err)
        self.L.nfs_destroy_url(url)
        self.L.nfs_set_timeout(self.ctx, 60000)
        self.check(self.L.nfs_mount(self.ctx, b"127.0.0.1", b"/"), "mount")

    def check(self, rc, what):
        if rc < 0:
            err = self.L.nfs_get_error(self.ctx).decode(errors="replace")
            raise NfsError("%s: %s" % (what, err))
        return rc

    def close(self):
        if self.ctx:
            self.L.nfs_destroy_context(self.ctx)
            self.ctx = None

    def write_file(self, path, data, chunk=65536):
        fh = ctypes.c_void_p()
        # O_TRUNC: libnfs' nfs_creat() keeps the old bytes of an existing file.
        self.check(self.L.nfs_create(self.ctx, path.encode(), os.O_CREAT | os.O_TRUNC | os.O_WRONLY,
                                     0o644, ctypes.byref(fh)), "create")
        try:
            for off in range(0, len(data), chunk):
                part = data[off:off + chunk]
                n = self.check(self.L.nfs_pwrite(self.ctx, fh, off, len(part), part), "write")
                if n != len(part):
                    raise NfsError("short write %d of %d" % (n, len(part)))
            self.check(self.L.nfs_fsync(self.ctx, fh), "commit")
        finally:
            self.L.nfs_close(self.ctx, fh)

    def read_file(self, path, size, chunk=65536):
        fh = ctypes.c_void_p()
        self.check(self.L.nfs_open(self.ctx, path.encode(), os.O_RDONLY, ctypes.byref(fh)),
                   "open")
        out = []
        try:
            buf = ctypes.create_string_buffer(chunk)
            off = 0
            while True:
                # One read past the expected size must find the end of the file.
                want = min(chunk, size - off) if off < size else 1
                n = self.check(self.L.nfs_pread(self.ctx, fh, off, want, buf), "read")
                if n == 0:
                    break
                out.append(buf.raw[:n])
                off += n
        finally:
            self.L.nfs_close(self.ctx, fh)
        return b"".join(out)

    def listdir(self, path):
        d = ctypes.c_void_p()
        self.check(self.L.nfs_opendir(self.ctx, path.encode(), ctypes.byref(d)), "opendir")
        names = []
        try:
            while True:
                e = self.L.nfs_readdir(self.ctx, d)
                if not e:
                    break
                names.append(e.contents.name.decode())
        finally:
            self.L.nfs_closedir(self.ctx, d)
        return [n for n in names if n not in (".", "..")]

    def stat(self, path):
        buf = ctypes.create_string_buffer(256)
        self.check(self.L.nfs_stat64(self.ctx, path.encode(), buf), "getattr")

    def unlink(self, path):
        self.check(self.L.nfs_unlink(self.ctx, path.encode()), "remove")

    def rename(self, a, b):
        self.check(self.L.nfs_rename(self.ctx, a.encode(), b.encode()), "rename")

    def mkdir(self, path):
        self.check(self.L.nfs_mkdir(self.ctx, path.encode()), "mkdir")

    def rmdir(self, path):
        self.check(self.L.nfs_rmdir(self.ctx, path.encode()), "rmdir")
