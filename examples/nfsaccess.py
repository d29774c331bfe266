# SPDX-License-Identifier: Apache-2.0
"""NFS access for the examples, two ways behind one small interface:

- MountedNfs: a directory where the export is mounted by the kernel client
  (`mount -t nfs -o vers=3,proto=tcp,port=P,mountport=P,nolock 127.0.0.1:/ /mnt`);
  plain file I/O, what a training job does.
- RpcNfs: no mount needed (containers, CI, no root): the user-space NFSv3 client
  of the test suite (tests/integration/nfs/rpc3.py, extended by
  tests/integration/cross/crossutil.py), speaking NFSv3 over TCP to the daemon.

Paths are relative to the export root: "bucket/dir/file".
"""
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration", "cross"))


class MountedNfs:
    def __init__(self, root):
        self.root = root

    def _p(self, path):
        return os.path.join(self.root, path)

    def walk(self, top):
        """{relative path under top: size} of every regular file."""
        out = {}
        base = self._p(top)
        for d, _, files in os.walk(base):
            for f in files:
                full = os.path.join(d, f)
                out[os.path.relpath(full, base)] = os.path.getsize(full)
        return out

    def sha256(self, path):
        h = hashlib.sha256()
        with open(self._p(path), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()

    def mkdirs(self, path):
        os.makedirs(self._p(path), exist_ok=True)

    def write_file(self, path, chunks, header_len=0, header=None):
        """Write chunks sequentially from offset header_len, then header() (called
        once the chunks are written, so it may depend on them) at offset 0; then
        fsync (NFS COMMIT). Returns bytes written."""
        n = 0
        with open(self._p(path), "wb") as f:
            f.seek(header_len)
            for c in chunks:
                f.write(c)
                n += len(c)
            if header:
                f.seek(0)
                h = header()
                f.write(h)
                n += len(h)
            f.flush()
            os.fsync(f.fileno())
        return n

    def rename(self, src, dst):
        os.rename(self._p(src), self._p(dst))

    def close(self):
        pass


class RpcNfs:
    def __init__(self, port, host="127.0.0.1"):
        from crossutil import Nfs
        self.c = Nfs(port)
        self.c.sock.settimeout(600)
        self._dirs = {}

    def _dir(self, path):
        if path not in self._dirs:
            self._dirs[path] = self.c.fh(path)
        return self._dirs[path]

    def walk(self, top):
        return {p.decode(): a["size"] for p, (a, _) in self.c.walk(top).items()
                if a["type"] == 1}

    def sha256(self, path):
        d, name = os.path.split(path)
        st, fh = self.c.lookup(self._dir(d), name.encode())
        if st:
            raise OSError(f"LOOKUP {path}: NFS3 status {st}")
        h, off = hashlib.sha256(), 0
        while True:
            st, res = self.c.read(fh, off, 1 << 20)
            if st:
                raise OSError(f"READ {path}: NFS3 status {st}")
            data, eof, _ = res
            h.update(data)
            off += len(data)
            if eof or not data:
                return h.hexdigest()

    def mkdirs(self, path):
        self.c.mkdirs(path)

    def write_file(self, path, chunks, header_len=0, header=None):
        d, name = os.path.split(path)
        dfh = self._dir(d)
        st, fh = self.c.lookup(dfh, name.encode())
        if st == 0:
            self.c.setattr_fh(fh, size=0)
        else:
            st, fh = self.c.create(dfh, name.encode())
            if st:
                raise OSError(f"CREATE {path}: NFS3 status {st}")
        off = header_len
        for c in chunks:
            self.c.write_all(fh, off, c, stable=0)  # UNSTABLE, as the kernel client
            off += len(c)
        if header:
            self.c.write_all(fh, 0, header(), stable=0)
        self.c.commit_fh(fh)
        return off

    def rename(self, src, dst):
        self.c.rename(src, dst)

    def close(self):
        self.c.close()


def open_nfs(args):
    """From --nfs-mount DIR or --nfs-port PORT (command-line args of the examples)."""
    if args.nfs_mount:
        return MountedNfs(args.nfs_mount)
    return RpcNfs(args.nfs_port)


def add_args(p):
    p.add_argument("--endpoint", default=os.environ.get("S3_ENDPOINT", "http://127.0.0.1:9000"),
                   help="S3 endpoint URL (env S3_ENDPOINT)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--nfs-mount", help="where the export '/' is mounted by the kernel client")
    g.add_argument("--nfs-port", type=int, default=int(os.environ.get("NFS_PORT", "2049")),
                   help="NFS+MOUNT port for the user-space client (env NFS_PORT)")
    p.add_argument("--bucket", default="examples")
