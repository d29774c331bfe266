# SPDX-License-Identifier: Apache-2.0
"""A tiny ONC RPC / NFSv3 / MOUNTv3 client for protocol-level tests.

Written from RFC 5531 (RPC, record marking) and RFC 1813 (NFSv3, MOUNTv3),
with no dependency beyond the standard library, so tests can send exactly the
bytes they want: malformed records, forged handles, retransmitted xids,
pipelined calls.
"""
import os
import socket
import struct

NFS_PROG, MNT_PROG = 100003, 100005
AUTH_NONE, AUTH_SYS = 0, 1

# accept_stat
SUCCESS, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS, SYSTEM_ERR = range(6)
# auth_stat
AUTH_BADCRED, AUTH_TOOWEAK = 1, 5

NFS3_OK = 0
NFS3ERR_NOENT, NFS3ERR_EXIST, NFS3ERR_NOTDIR = 2, 17, 20
NFS3ERR_INVAL, NFS3ERR_NAMETOOLONG, NFS3ERR_ROFS = 22, 63, 30
NFS3ERR_STALE, NFS3ERR_BADHANDLE, NFS3ERR_BAD_COOKIE = 70, 10001, 10003
NFS3ERR_NOTSUPP, NFS3ERR_TOOSMALL, NFS3ERR_BADTYPE = 10004, 10005, 10007
NFS3ERR_ACCES, NFS3ERR_XDEV, NFS3ERR_NOT_SYNC = 13, 18, 10002

(NULL, GETATTR, SETATTR, LOOKUP, ACCESS, READLINK, READ, WRITE, CREATE, MKDIR, SYMLINK,
 MKNOD, REMOVE, RMDIR, RENAME, LINK, READDIR, READDIRPLUS, FSSTAT, FSINFO, PATHCONF,
 COMMIT) = range(22)
MNT_NULL, MNT_MNT, MNT_DUMP, MNT_UMNT, MNT_UMNTALL, MNT_EXPORT = range(6)


class Packer:
    def __init__(self):
        self.parts = []

    def u32(self, v):
        self.parts.append(struct.pack(">I", v & 0xffffffff))
        return self

    def u64(self, v):
        self.parts.append(struct.pack(">Q", v))
        return self

    def fopaque(self, b):
        self.parts.append(bytes(b) + b"\0" * ((4 - len(b) % 4) % 4))
        return self

    def opaque(self, b):
        self.u32(len(b))
        return self.fopaque(b)

    def string(self, s):
        return self.opaque(s.encode() if isinstance(s, str) else s)

    def raw(self, b):
        self.parts.append(b)
        return self

    def bytes(self):
        return b"".join(self.parts)


class Unpacker:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def u32(self):
        v, = struct.unpack_from(">I", self.data, self.pos)
        self.pos += 4
        return v

    def u64(self):
        v, = struct.unpack_from(">Q", self.data, self.pos)
        self.pos += 8
        return v

    def fopaque(self, n):
        b = self.data[self.pos:self.pos + n]
        if len(b) != n:
            raise ValueError("short opaque")
        self.pos += n + (4 - n % 4) % 4
        return b

    def opaque(self):
        return self.fopaque(self.u32())

    def string(self):
        return self.opaque().decode(errors="replace")

    def fattr3(self):
        keys = ["type", "mode", "nlink", "uid", "gid"]
        a = {k: self.u32() for k in keys}
        a["size"], a["used"] = self.u64(), self.u64()
        a["rdev"] = (self.u32(), self.u32())
        a["fsid"], a["fileid"] = self.u64(), self.u64()
        for t in ("atime", "mtime", "ctime"):
            a[t] = (self.u32(), self.u32())
        return a

    def post_op_attr(self):
        return self.fattr3() if self.u32() else None

    def pre_op_attr(self):
        if not self.u32():
            return None
        return {"size": self.u64(), "mtime": (self.u32(), self.u32()),
                "ctime": (self.u32(), self.u32())}

    def wcc(self):
        return self.pre_op_attr(), self.post_op_attr()

    def post_op_fh(self):
        return self.opaque() if self.u32() else None


def sattr3(mode=None, size=None):
    p = Packer()
    if mode is None:
        p.u32(0)
    else:
        p.u32(1).u32(mode)
    p.u32(0).u32(0)  # uid, gid
    if size is None:
        p.u32(0)
    else:
        p.u32(1).u64(size)
    p.u32(0).u32(0)  # atime, mtime: DONT_CHANGE
    return p.bytes()


def auth_sys(uid=0, gid=0, gids=(), machine="pytest"):
    p = Packer().u32(0).string(machine).u32(uid).u32(gid).u32(len(gids))
    for g in gids:
        p.u32(g)
    return (AUTH_SYS, p.bytes())


class Reply:
    def __init__(self, data):
        u = Unpacker(data)
        self.xid = u.u32()
        assert u.u32() == 1, "not a REPLY"
        self.accepted = u.u32() == 0
        self.accept_stat = self.reject_stat = self.auth_stat = None
        self.mismatch = None
        if self.accepted:
            u.u32()
            u.opaque()  # verifier
            self.accept_stat = u.u32()
            if self.accept_stat == PROG_MISMATCH:
                self.mismatch = (u.u32(), u.u32())
        else:
            self.reject_stat = u.u32()
            if self.reject_stat == 0:
                self.mismatch = (u.u32(), u.u32())
            else:
                self.auth_stat = u.u32()
        self.body = Unpacker(data[u.pos:])
        self.raw = data


class RpcConn:
    def __init__(self, port, host="127.0.0.1", cred=None, timeout=20, source=None):
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.cred = cred or auth_sys()
        self.xid = struct.unpack(">I", os.urandom(4))[0]

    def close(self):
        self.sock.close()

    def next_xid(self):
        self.xid = (self.xid + 1) & 0xffffffff
        return self.xid

    def call_bytes(self, prog, vers, proc, args=b"", xid=None, cred=None, rpcvers=2):
        flavor, body = cred or self.cred
        xid = self.next_xid() if xid is None else xid
        msg = (Packer().u32(xid).u32(0).u32(rpcvers).u32(prog).u32(vers).u32(proc)
               .u32(flavor).opaque(body).u32(0).u32(0).raw(args).bytes())
        return xid, msg

    @staticmethod
    def record(msg, frags=1):
        out, n = [], len(msg)
        step = max(1, (n + frags - 1) // frags)
        chunks = [msg[i:i + step] for i in range(0, n, step)] or [b""]
        for i, c in enumerate(chunks):
            last = 0x80000000 if i == len(chunks) - 1 else 0
            out.append(struct.pack(">I", last | len(c)) + c)
        return b"".join(out)

    def send_raw(self, data):
        self.sock.sendall(data)

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by server")
            buf += chunk
        return buf

    def recv_record(self):
        data = b""
        while True:
            mark, = struct.unpack(">I", self._recv_exact(4))
            data += self._recv_exact(mark & 0x7fffffff)
            if mark & 0x80000000:
                return data

    def recv_reply(self):
        return Reply(self.recv_record())

    def call(self, prog, vers, proc, args=b"", **kw):
        frags = kw.pop("frags", 1)
        xid, msg = self.call_bytes(prog, vers, proc, args, **kw)
        self.send_raw(self.record(msg, frags))
        r = self.recv_reply()
        assert r.xid == xid, f"xid {r.xid:#x} != {xid:#x}"
        return r

    # ---- MOUNT ----
    def mnt(self, path="/"):
        r = self.call(MNT_PROG, 3, MNT_MNT, Packer().string(path).bytes())
        st = r.body.u32()
        if st != 0:
            return st, None
        fh = r.body.opaque()
        flavors = [r.body.u32() for _ in range(r.body.u32())]
        return 0, (fh, flavors)

    def mnt_list(self, proc):
        r = self.call(MNT_PROG, 3, proc)
        out, u = [], r.body
        while u.u32():
            if proc == MNT_DUMP:
                out.append((u.string(), u.string()))
            else:
                d, groups = u.string(), []
                while u.u32():
                    groups.append(u.string())
                out.append((d, groups))
        return out

    # ---- NFS ----
    def nfs(self, proc, args=b"", **kw):
        r = self.call(NFS_PROG, 3, proc, args, **kw)
        assert r.accepted and r.accept_stat == SUCCESS, vars(r)
        return r.body.u32(), r.body

    def new_bucket(self, path="/"):
        """MNT @p path (a tenant root) and make a bucket of a fresh name there.
        @return (name, handle); asserts both calls succeed."""
        st, res = self.mnt(path)
        assert st == 0, st
        name = "t" + os.urandom(6).hex()
        st, fh = self.mkdir(res[0], name)
        assert st == 0, st
        return name, fh

    def getattr(self, fh):
        st, u = self.nfs(GETATTR, Packer().opaque(fh).bytes())
        return st, (u.fattr3() if st == 0 else None)

    def lookup(self, dfh, name):
        st, u = self.nfs(LOOKUP, Packer().opaque(dfh).string(name).bytes())
        if st != 0:
            return st, None
        return st, u.opaque()

    def mkdir(self, dfh, name, mode=0o755, xid=None):
        args = Packer().opaque(dfh).string(name).raw(sattr3(mode)).bytes()
        st, u = self.nfs(MKDIR, args, xid=xid)
        return st, (u.post_op_fh() if st == 0 else None)

    def create(self, dfh, name, mode=0o644, how=0):
        args = Packer().opaque(dfh).string(name).u32(how).raw(sattr3(mode)).bytes()
        st, u = self.nfs(CREATE, args)
        return st, (u.post_op_fh() if st == 0 else None)

    def write(self, fh, off, data, stable=2):
        args = Packer().opaque(fh).u64(off).u32(len(data)).u32(stable).opaque(data).bytes()
        st, u = self.nfs(WRITE, args)
        if st != 0:
            return st, None
        u.wcc()
        return st, {"count": u.u32(), "committed": u.u32(), "verf": u.fopaque(8)}

    def read(self, fh, off, count):
        st, u = self.nfs(READ, Packer().opaque(fh).u64(off).u32(count).bytes())
        if st != 0:
            return st, None
        u.post_op_attr()
        n, eof = u.u32(), u.u32()
        return st, (u.opaque(), bool(eof), n)

    def readdir(self, dfh, cookie=0, verf=b"\0" * 8, count=4096):
        st, u = self.nfs(READDIR, Packer().opaque(dfh).u64(cookie).fopaque(verf).u32(count)
                         .bytes())
        if st != 0:
            return st, None
        u.post_op_attr()
        verf = u.fopaque(8)
        ents = []
        while u.u32():
            ents.append((u.u64(), u.string(), u.u64()))
        return st, (ents, bool(u.u32()), verf)

    def readdirplus(self, dfh, cookie=0, verf=b"\0" * 8, dircount=4096, maxcount=8192):
        """(status, (entries, eof, verf, dir_attr)); an entry is a dict of
        fileid, name, cookie, attr (or None) and fh (or None). On failure the
        second item is the directory's post_op_attr."""
        st, u = self.nfs(READDIRPLUS, Packer().opaque(dfh).u64(cookie).fopaque(verf)
                         .u32(dircount).u32(maxcount).bytes())
        dattr = u.post_op_attr()
        if st != 0:
            return st, dattr
        verf = u.fopaque(8)
        ents = []
        while u.u32():
            ents.append({"fileid": u.u64(), "name": u.string(), "cookie": u.u64(),
                         "attr": u.post_op_attr(), "fh": u.post_op_fh()})
        eof = bool(u.u32())
        assert u.pos == len(u.data), "nothing after the eof flag"
        return st, (ents, eof, verf, dattr)

    def fsinfo(self, fh):
        st, u = self.nfs(FSINFO, Packer().opaque(fh).bytes())
        if st != 0:
            return st, None
        u.post_op_attr()
        keys = ["rtmax", "rtpref", "rtmult", "wtmax", "wtpref", "wtmult", "dtpref"]
        d = {k: u.u32() for k in keys}
        d["maxfilesize"] = u.u64()
        d["time_delta"] = (u.u32(), u.u32())
        d["properties"] = u.u32()
        return st, d

    def pathconf(self, fh):
        st, u = self.nfs(PATHCONF, Packer().opaque(fh).bytes())
        if st != 0:
            return st, None
        u.post_op_attr()
        keys = ["linkmax", "name_max", "no_trunc", "chown_restricted", "case_insensitive",
                "case_preserving"]
        return st, {k: u.u32() for k in keys}

    def fsstat(self, fh):
        st, u = self.nfs(FSSTAT, Packer().opaque(fh).bytes())
        if st != 0:
            return st, None
        u.post_op_attr()
        keys = ["tbytes", "fbytes", "abytes", "tfiles", "ffiles", "afiles"]
        d = {k: u.u64() for k in keys}
        d["invarsec"] = u.u32()
        return st, d


# ---- a minimal ONC RPC server over TCP: the fake client-side daemons
# (portmapper, lock manager, status monitor) of the NLM tests

def read_record(sock):
    """One record-marked RPC message from @p sock; None when the peer closes."""
    data = b""
    while True:
        hdr = b""
        while len(hdr) < 4:
            chunk = sock.recv(4 - len(hdr))
            if not chunk:
                return None
            hdr += chunk
        mark, = struct.unpack(">I", hdr)
        n = mark & 0x7fffffff
        while n:
            chunk = sock.recv(n)
            if not chunk:
                return None
            data += chunk
            n -= len(chunk)
        if mark & 0x80000000:
            return data


def serve_rpc(sock, handler):
    """Answer every call on listening socket @p sock, forever (run it in a
    thread): handler(prog, vers, proc, unpacker_at_args, peer) returns the
    reply body; the reply is MSG_ACCEPTED/SUCCESS with AUTH_NONE."""
    while True:
        conn, peer = sock.accept()
        while True:
            rec = read_record(conn)
            if rec is None:
                break
            u = Unpacker(rec)
            xid, _, _, prog, vers, proc = (u.u32() for _ in range(6))
            u.u32(), u.opaque(), u.u32(), u.opaque()  # cred, verf
            body = handler(prog, vers, proc, u, peer)
            msg = Packer().u32(xid).u32(1).u32(0).u32(0).u32(0).u32(0).raw(body).bytes()
            conn.sendall(struct.pack(">I", 0x80000000 | len(msg)) + msg)
        conn.close()


def rpc_listener(addr, port):
    """A listening TCP socket on addr:port (0: any free port)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(8)
    return s
