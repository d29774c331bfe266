# SPDX-License-Identifier: Apache-2.0
"""Helpers for the cross-protocol tests: one namespace seen through S3 and NFSv3.

NFS goes through the NFS front end's own raw client (tests/integration/nfs/rpc3.py):
`Nfs` subclasses its RpcConn and adds the procedures those tests did not need
(REMOVE, RMDIR, RENAME, LINK, SYMLINK, READLINK, COMMIT, SETATTR, READDIRPLUS) and
path helpers. Errors raise NfsError carrying the NFS3ERR_* status, so a test can
assert the exact status the other protocol's action produced.

S3 goes through boto3 (the fixture's client) and, for keys boto3 cannot spell
(bytes that are not UTF-8), the hand-made SigV4 requests of tests/integration/s3/s3util.py.
"""
import hashlib
import json
import os
import sys
import threading
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "nfs"))
sys.path.insert(0, os.path.join(HERE, "..", "s3"))
import rpc3  # noqa: E402
from rpc3 import Packer  # noqa: E402

NF_REG, NF_DIR, NF_LNK = 1, 2, 5
NFS3ERR_NOTEMPTY, NFS3ERR_ISDIR, NFS3ERR_PERM = 66, 21, 1
CHUNK = 1 << 20


def bucket_name(tag="x"):
    return f"{tag}{uuid.uuid4().hex[:12]}"


def md5(b):
    return hashlib.md5(b).hexdigest()


def pattern(n, seed=0):
    """Deterministic, seed-dependent bytes (fast for megabytes)."""
    block = hashlib.sha256(f"{seed}".encode()).digest() * 2048  # 64 KiB
    reps = n // len(block) + 1
    return (block * reps)[:n]


def run_workers(seconds, workers, stop, errors):
    """Run each worker in a thread until @p seconds pass, @p stop is set or an error
    is recorded; a worker's exception is recorded as an error. Joins them all."""
    def guard(w):
        try:
            w()
        except Exception as e:  # noqa: BLE001 - reported as a test failure
            errors.append(f"{w.__name__}: {type(e).__name__}: {e}")
            stop.set()

    ts = [threading.Thread(target=guard, args=(w,)) for w in workers]
    for t in ts:
        t.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop.is_set() and not errors:
        time.sleep(0.1)
    stop.set()
    for t in ts:
        t.join(300)


class NfsError(Exception):
    def __init__(self, status, what=""):
        super().__init__(f"{what}: NFS3 status {status}")
        self.status = status


def _ok(st, what):
    if st != 0:
        raise NfsError(st, what)


def _enc(name):
    return name.encode() if isinstance(name, str) else name


class Nfs(rpc3.RpcConn):
    """An NFSv3 client on one TCP connection, mounted at `export` (default "/")."""

    def __init__(self, port, uid=0, gid=0, gids=(), export="/", timeout=60):
        super().__init__(port, cred=rpc3.auth_sys(uid, gid, gids), timeout=timeout)
        st, res = self.mnt(export)
        _ok(st, f"MNT {export}")
        self.root = res[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- paths: "bucket/a/b" relative to the mounted root; names may be bytes ----
    @staticmethod
    def split(path):
        p = _enc(path).strip(b"/")
        return [s for s in p.split(b"/") if s] if p else []

    def fh(self, path):
        fh = self.root
        for name in self.split(path):
            st, fh = self.lookup(fh, name)
            _ok(st, f"LOOKUP {path!r}")
        return fh

    def parent(self, path):
        parts = self.split(path)
        dfh = self.root
        for name in parts[:-1]:
            st, dfh = self.lookup(dfh, name)
            _ok(st, f"LOOKUP {path!r}")
        return dfh, parts[-1]

    def stat(self, path):
        st, a = self.getattr(self.fh(path))
        _ok(st, f"GETATTR {path!r}")
        return a

    def exists(self, path):
        try:
            self.fh(path)
            return True
        except NfsError as e:
            if e.status == rpc3.NFS3ERR_NOENT:
                return False
            raise

    # ---- procedures rpc3 does not wrap ----
    def _dirop(self, proc, dfh, name, what):
        st, _ = self.nfs(proc, Packer().opaque(dfh).string(_enc(name)).bytes())
        _ok(st, what)

    def remove_fh(self, dfh, name):
        self._dirop(rpc3.REMOVE, dfh, name, f"REMOVE {name!r}")

    def rmdir_fh(self, dfh, name):
        self._dirop(rpc3.RMDIR, dfh, name, f"RMDIR {name!r}")

    def rename_fh(self, fdfh, fname, tdfh, tname):
        args = (Packer().opaque(fdfh).string(_enc(fname)).opaque(tdfh).string(_enc(tname))
                .bytes())
        st, _ = self.nfs(rpc3.RENAME, args)
        _ok(st, f"RENAME {fname!r} -> {tname!r}")

    def link_fh(self, fh, dfh, name):
        st, _ = self.nfs(rpc3.LINK, Packer().opaque(fh).opaque(dfh).string(_enc(name)).bytes())
        _ok(st, f"LINK {name!r}")

    def symlink_fh(self, dfh, name, target):
        args = (Packer().opaque(dfh).string(_enc(name)).raw(rpc3.sattr3(0o777))
                .string(_enc(target)).bytes())
        st, u = self.nfs(rpc3.SYMLINK, args)
        _ok(st, f"SYMLINK {name!r}")
        return u.post_op_fh()

    def readlink_fh(self, fh):
        st, u = self.nfs(rpc3.READLINK, Packer().opaque(fh).bytes())
        _ok(st, "READLINK")
        u.post_op_attr()
        return u.opaque()

    def commit_fh(self, fh):
        st, u = self.nfs(rpc3.COMMIT, Packer().opaque(fh).u64(0).u32(0).bytes())
        _ok(st, "COMMIT")
        u.wcc()
        return u.fopaque(8)

    def setattr_fh(self, fh, mode=None, size=None, uid=None, gid=None, mtime=None):
        p = Packer()
        for v in (mode, uid, gid):
            if v is None:
                p.u32(0)
            else:
                p.u32(1).u32(v)
        if size is None:
            p.u32(0)
        else:
            p.u32(1).u64(size)
        p.u32(0)  # atime: don't change
        if mtime is None:
            p.u32(0)
        else:
            p.u32(2).u32(mtime[0]).u32(mtime[1])  # SET_TO_CLIENT_TIME
        p.u32(0)  # no guard
        st, _ = self.nfs(rpc3.SETATTR, Packer().opaque(fh).raw(p.bytes()).bytes())
        _ok(st, "SETATTR")

    def readdirplus(self, dfh, cookie=0, verf=b"\0" * 8, dircount=8192, maxcount=65536):
        args = (Packer().opaque(dfh).u64(cookie).fopaque(verf).u32(dircount).u32(maxcount)
                .bytes())
        st, u = self.nfs(rpc3.READDIRPLUS, args)
        _ok(st, "READDIRPLUS")
        u.post_op_attr()
        verf = u.fopaque(8)
        ents = []
        while u.u32():
            fileid, name, ck = u.u64(), u.opaque(), u.u64()
            attr = u.post_op_attr()
            fh = u.post_op_fh()
            ents.append((name, ck, attr, fh, fileid))
        return ents, bool(u.u32()), verf

    # ---- path-level helpers ----
    def listdir(self, path):
        """[(name bytes, attr, fh)] of a directory, without "." and ".."."""
        return self.listdir_fh(self.fh(path))

    def listdir_fh(self, dfh):
        out, cookie, verf = [], 0, b"\0" * 8
        while True:
            ents, eof, verf = self.readdirplus(dfh, cookie, verf)
            for name, ck, attr, fh, _ in ents:
                if name not in (b".", b".."):
                    out.append((name, attr, fh))
                cookie = ck
            if eof:
                return out

    def walk(self, path):
        """Recursive walk: {relative path bytes: attr} of every entry under path."""
        out = {}
        stack = [(b"", self.fh(path))]
        while stack:
            rel, dfh = stack.pop()
            for name, attr, fh in self.listdir_fh(dfh):
                p = rel + name
                out[p] = (attr, fh)
                if attr and attr["type"] == NF_DIR:
                    stack.append((p + b"/", fh))
        return out

    def mkdirs(self, path):
        fh = self.root
        for name in self.split(path):
            st, nfh = self.lookup(fh, name)
            if st == rpc3.NFS3ERR_NOENT:
                st, nfh = self.mkdir(fh, name)
                if st == rpc3.NFS3ERR_EXIST:
                    st, nfh = self.lookup(fh, name)
            _ok(st, f"MKDIR {path!r}")
            fh = nfh
        return fh

    def put(self, path, data, stable=2, commit=True, chunk=CHUNK, mode=0o644):
        """Create (or truncate) path and write data sequentially; returns the handle."""
        dfh, name = self.parent(path)
        st, fh = self.lookup(dfh, name)
        if st == 0:
            self.setattr_fh(fh, size=0)
        else:
            st, fh = self.create(dfh, name, mode=mode)
            _ok(st, f"CREATE {path!r}")
        self.write_all(fh, 0, data, stable=stable, chunk=chunk)
        if commit and stable != 2:
            self.commit_fh(fh)
        return fh

    def write_all(self, fh, off, data, stable=2, chunk=CHUNK):
        mv = memoryview(data)
        pos = 0
        while pos < len(data) or (pos == 0 and len(data) == 0):
            if len(data) == 0:
                break
            n = min(chunk, len(data) - pos)
            st, res = self.write(fh, off + pos, bytes(mv[pos:pos + n]), stable=stable)
            _ok(st, "WRITE")
            pos += res["count"]

    def read_fh(self, fh, chunk=CHUNK):
        out, off = [], 0
        while True:
            st, res = self.read(fh, off, chunk)
            _ok(st, "READ")
            data, eof, n = res
            out.append(data)
            off += len(data)
            if eof or not data:
                return b"".join(out)

    def get(self, path):
        return self.read_fh(self.fh(path))

    def unlink(self, path):
        dfh, name = self.parent(path)
        self.remove_fh(dfh, name)

    def rmdir_path(self, path):
        dfh, name = self.parent(path)
        self.rmdir_fh(dfh, name)

    def rename(self, src, dst):
        sd, sn = self.parent(src)
        dd, dn = self.parent(dst)
        self.rename_fh(sd, sn, dd, dn)

    def link(self, src, dst):
        dd, dn = self.parent(dst)
        self.link_fh(self.fh(src), dd, dn)

    def symlink(self, path, target):
        dd, dn = self.parent(path)
        return self.symlink_fh(dd, dn, target)


class Admin:
    """The admin REST API (JSON, bearer token)."""

    def __init__(self, d):
        self.base = d.admin_endpoint + "/api/v1"
        self.token = d.admin_token

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, body):
        return self.call("POST", path, body)


def s3_list_all(s3, bucket, prefix="", delimiter=None):
    """Every key (and common prefix) of a bucket through ListObjectsV2 paging."""
    keys, prefixes, objs = [], [], {}
    kw = {"Bucket": bucket, "Prefix": prefix}
    if delimiter:
        kw["Delimiter"] = delimiter
    while True:
        r = s3.list_objects_v2(**kw)
        for o in r.get("Contents", []):
            keys.append(o["Key"])
            objs[o["Key"]] = o
        prefixes += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        if not r.get("IsTruncated"):
            return keys, prefixes, objs
        kw["ContinuationToken"] = r["NextContinuationToken"]


def s3_error(excinfo_or_exc):
    e = getattr(excinfo_or_exc, "value", excinfo_or_exc)
    return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]


# ---- raw S3 requests for keys given as bytes (boto3 only takes str keys) ----

_UNRESERVED = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def pct(b, keep_slash=True):
    """AWS URI encoding of bytes: every byte but unreserved (and '/') as %XX."""
    return "".join(chr(c) if c in _UNRESERVED or (keep_slash and c == 0x2f) else f"%{c:02X}"
                   for c in b)


def s3_raw(d, method, bucket, key=b"", query=(), body=b"", headers=None):
    """One signed request; key is bytes. Returns (status, headers, body)."""
    import s3util
    host = d.s3_endpoint.split("//", 1)[1]
    path = f"/{bucket}" + ("/" + pct(key) if key else "")
    amz_date = s3util.amz_now()
    payload = hashlib.sha256(body).hexdigest()
    h = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload}
    h.update({k.lower(): v for k, v in (headers or {}).items()})
    names = sorted(h)
    q = sorted((pct(_enc(k), False), pct(_enc(v), False)) for k, v in query)
    cq = "&".join(f"{k}={v}" for k, v in q)
    canon = "\n".join([method, path, cq, "".join(f"{n}:{h[n]}\n" for n in names),
                       ";".join(names), payload])
    scope = f"{amz_date[:8]}/us-east-1/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    import hmac
    sig = hmac.new(s3util.signing_key(d.secret_key, amz_date[:8]), sts.encode(),
                   hashlib.sha256).hexdigest()
    h["authorization"] = (f"AWS4-HMAC-SHA256 Credential={d.access_key}/{scope}, "
                          f"SignedHeaders={';'.join(names)}, Signature={sig}")
    h["content-length"] = str(len(body))
    target = path + ("?" + cq if cq else "")
    s = s3util.connect(d)
    try:
        s.sendall(s3util.build_request(method, target, h, body))
        return s3util.read_response(s, head=(method == "HEAD"))
    finally:
        s.close()


def s3_raw_list(d, bucket, prefix=b"", delimiter=None, max_keys=1000):
    """ListObjectsV2 with encoding-type=url, keys decoded to bytes; all pages.
    Returns (keys, prefixes) as lists of bytes."""
    import re
    import urllib.parse
    keys, prefixes, token = [], [], None
    while True:
        q = [("list-type", "2"), ("encoding-type", "url"), ("max-keys", str(max_keys))]
        if prefix:
            q.append(("prefix", prefix))
        if delimiter:
            q.append(("delimiter", delimiter))
        if token:
            q.append(("continuation-token", token))
        st, _, body = s3_raw(d, "GET", bucket, query=q)
        assert st == 200, body
        text = body.decode("utf-8", "surrogateescape")
        for m in re.finditer(r"<Contents><Key>(.*?)</Key>", text, re.S):
            keys.append(urllib.parse.unquote_to_bytes(m.group(1)))
        for m in re.finditer(r"<CommonPrefixes><Prefix>(.*?)</Prefix>", text, re.S):
            prefixes.append(urllib.parse.unquote_to_bytes(m.group(1)))
        if "<IsTruncated>true</IsTruncated>" not in text:
            return keys, prefixes
        token = re.search(r"<NextContinuationToken>(.*?)</NextContinuationToken>", text).group(1)
