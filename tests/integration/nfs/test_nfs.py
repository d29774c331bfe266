# SPDX-License-Identifier: Apache-2.0
"""NFSv3 + MOUNTv3 front end against a real s3nfsd.

Two clients: libnfs (the C program nfs3_client.c, compiled here) for the
procedures as applications use them, and rpc3.py for exact protocol bytes
(errors, forged handles, retransmissions, fragments, pipelining).
"""
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import rpc3  # noqa: E402
from rpc3 import NFS_PROG, MNT_PROG, Packer, RpcConn  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def s3nfsd(daemon_factory):
    """The shared daemon fixture, with a small data file, and its data removed
    afterwards: a module of many tests must not hold a 2 GiB preallocated
    store per test until the session ends."""
    d = daemon_factory(extra_args=["--set", "data_file_size=512MiB"]).start()
    yield d
    d.stop()
    shutil.rmtree(d.data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def nfs3_client(tmp_path_factory):
    """Build the libnfs test client once per session."""
    out = str(tmp_path_factory.mktemp("nfsbin") / "nfs3_client")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libnfs"], check=True,
                           capture_output=True, text=True).stdout.split()
    subprocess.run(["cc", "-std=gnu11", "-O1", "-Wall", "-o", out,
                    os.path.join(HERE, "nfs3_client.c")] + flags, check=True)
    return out


def bucket_name():
    return "t" + uuid.uuid4().hex[:12]


def run_client(binary, daemon, scenario, bucket, url=None, timeout=300):
    p = subprocess.run([binary, url or daemon.nfs_url, scenario, bucket], capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0 and "DONE" in p.stdout, (
        f"{scenario} failed:\n{p.stdout}\n{p.stderr}\n--- daemon log ---\n{daemon.tail()}")
    return p.stdout


def root_fh(conn, path="/"):
    st, res = conn.mnt(path)
    assert st == 0, f"MNT {path} -> {st}"
    return res[0]


# ---------------------------------------------------------------- procedures

def test_procedures_through_libnfs(s3nfsd, nfs3_client):
    out = run_client(nfs3_client, s3nfsd, "procs", bucket_name())
    for what in ("MKDIR bucket", "WRITE 3 MiB", "COMMIT", "READ back", "SETATTR mode",
                 "SETATTR size (truncate)", "SETATTR times", "ACCESS rw", "SYMLINK", "READLINK",
                 "LINK (nlink 2)", "RENAME over existing", "READDIRPLUS lists every entry once",
                 "FSSTAT", "MKNOD fifo refused", "GETATTR of a removed inode is STALE",
                 "RMDIR bucket"):
        assert f"ok {what}\n" in out


def run_hold(binary, daemon, meanwhile):
    """nfs3_client's "hold" scenario: it sets up files and takes handles, then
    meanwhile() runs (the daemon restarts, or closes the idle connection),
    then the client uses the old handles. @return its output after that."""
    p = subprocess.Popen([binary, daemon.nfs_url, "hold", bucket_name()], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if line.startswith("READY") or line.startswith("FAIL"):
                break
        assert lines and lines[-1].startswith("READY"), "".join(lines)
        meanwhile()
        p.stdin.write("go\n")
        p.stdin.flush()
        rest = p.stdout.read()
        assert p.wait(120) == 0, "".join(lines) + rest + daemon.tail()
        return rest
    finally:
        if p.poll() is None:
            p.kill()


def test_handles_survive_restart(s3nfsd, nfs3_client):
    rest = run_hold(nfs3_client, s3nfsd, s3nfsd.restart)  # same port, same data dir
    assert "ok READ with a pre-restart handle" in rest
    assert "ok GETATTR directory with a pre-restart handle" in rest


def test_raw_handles_survive_restart(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    b = bucket_name()
    st, bfh = c.mkdir(root, b)
    assert st == 0
    c.close()
    s3nfsd.restart()
    c = RpcConn(s3nfsd.nfs_port)
    st, attr = c.getattr(bfh)
    assert st == 0 and attr["type"] == 2
    assert c.lookup(root, b)[1] == bfh, "handles are stable: the same bytes after a restart"
    c.close()


def test_mount_procedures(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    assert c.call(MNT_PROG, 3, rpc3.MNT_NULL).accept_stat == rpc3.SUCCESS
    assert c.call(NFS_PROG, 3, rpc3.NULL).accept_stat == rpc3.SUCCESS
    st, (fh, flavors) = c.mnt("/")
    assert st == 0 and 0 < len(fh) <= 64 and flavors == [rpc3.AUTH_SYS]
    assert c.mnt("//")[1][0] == fh, "trailing slashes are ignored"
    assert c.mnt("/no/such/export")[0] == 2  # MNT3ERR_NOENT
    exports = c.mnt_list(rpc3.MNT_EXPORT)
    assert ("/", ["127.0.0.0/8", "::1/128"]) in exports or any(e[0] == "/" for e in exports)
    assert ("127.0.0.1", "/") in c.mnt_list(rpc3.MNT_DUMP)
    c.call(MNT_PROG, 3, rpc3.MNT_UMNT, Packer().string("/").bytes())
    assert ("127.0.0.1", "/") not in c.mnt_list(rpc3.MNT_DUMP)
    c.mnt("/")
    c.call(MNT_PROG, 3, rpc3.MNT_UMNTALL)
    assert c.mnt_list(rpc3.MNT_DUMP) == []
    c.close()


def test_fsinfo_pathconf_fsstat(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    fh = root_fh(c)
    st, fi = c.fsinfo(fh)
    assert st == 0
    assert fi["rtmax"] >= 1 << 20 and fi["wtmax"] >= 1 << 20
    assert fi["rtpref"] <= fi["rtmax"] and fi["dtpref"] > 0
    assert fi["maxfilesize"] >= 1 << 40 and fi["time_delta"] == (0, 1)
    assert fi["properties"] & 0x1b == 0x1b  # LINK SYMLINK HOMOGENEOUS CANSETTIME
    st, pc = c.pathconf(fh)
    assert st == 0 and pc["name_max"] == 255 and pc["no_trunc"] == 1
    assert pc["case_insensitive"] == 0 and pc["case_preserving"] == 1
    st, fs = c.fsstat(fh)
    assert st == 0 and fs["tbytes"] >= fs["fbytes"] >= 0 and fs["tfiles"] >= fs["ffiles"]
    c.close()


def test_readdir_paging_and_cookies(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, bfh = c.mkdir(root, bucket_name())
    assert st == 0
    names = {f"entry-{i:03d}" for i in range(120)}
    for n in names:
        assert c.create(bfh, n)[0] == 0
    seen, cookie, verf, pages = [], 0, b"\0" * 8, 0
    while True:
        st, (ents, eof, verf) = c.readdir(bfh, cookie, verf, count=600)
        assert st == 0
        pages += 1
        seen += [e[1] for e in ents]
        if eof:
            break
        assert ents, "a page that is not the last holds at least one entry"
        cookie = ents[-1][2]
    assert pages > 3, "count bounds the page size"
    assert sorted(seen) == sorted(names | {".", ".."})
    # A wrong verifier with a nonzero cookie is refused; a tiny count too.
    assert c.readdir(bfh, cookie, b"\x01" * 8)[0] == rpc3.NFS3ERR_BAD_COOKIE
    assert c.readdir(bfh, 0, count=40)[0] == rpc3.NFS3ERR_TOOSMALL
    # READDIR of a file: NOTDIR.
    st, ffh = c.lookup(bfh, "entry-000")
    assert st == 0 and c.readdir(ffh)[0] == rpc3.NFS3ERR_NOTDIR
    c.close()


def test_write_stability_and_verifier(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, bfh = c.mkdir(root, bucket_name())
    st, fh = c.create(bfh, "f")
    assert st == 0
    st, w1 = c.write(fh, 0, b"a" * 1000, stable=0)
    assert st == 0 and w1["count"] == 1000 and w1["committed"] in (0, 1, 2)
    st, w2 = c.write(fh, 1000, b"b" * 1000, stable=2)
    assert st == 0 and w2["committed"] == 2 and w2["verf"] == w1["verf"]
    st, u = c.nfs(rpc3.COMMIT, Packer().opaque(fh).u64(0).u32(0).bytes())
    assert st == 0
    u.wcc()
    assert u.fopaque(8) == w1["verf"]
    st, (data, eof, n) = c.read(fh, 0, 5000)
    assert st == 0 and data == b"a" * 1000 + b"b" * 1000 and eof and n == 2000
    # WRITE whose count exceeds its data is invalid.
    args = Packer().opaque(fh).u64(0).u32(10).u32(2).opaque(b"abc").bytes()
    assert c.nfs(rpc3.WRITE, args)[0] == rpc3.NFS3ERR_INVAL
    # WRITE to a directory.
    assert c.write(bfh, 0, b"x")[0] == 21  # ISDIR
    c.close()
    s3nfsd.restart()
    c = RpcConn(s3nfsd.nfs_port)
    st, w3 = c.write(fh, 0, b"c", stable=2)
    assert st == 0 and w3["verf"] != w1["verf"], "the write verifier changes on restart"
    c.close()


def test_setattr_guard_and_create_modes(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, bfh = c.mkdir(root, bucket_name())
    st, fh = c.create(bfh, "g")
    st, attr = c.getattr(fh)
    ctime = attr["ctime"]
    guard_ok = Packer().opaque(fh).raw(rpc3.sattr3(mode=0o600)).u32(1).u32(ctime[0]).u32(ctime[1])
    st, u = c.nfs(rpc3.SETATTR, guard_ok.bytes())
    assert st == 0
    pre, post = u.wcc()
    assert pre is not None and post is not None and post["mode"] & 0o7777 == 0o600
    guard_bad = Packer().opaque(fh).raw(rpc3.sattr3(mode=0o644)).u32(1).u32(1).u32(0)
    st, _ = c.nfs(rpc3.SETATTR, guard_bad.bytes())
    assert st == rpc3.NFS3ERR_NOT_SYNC
    # GUARDED create of an existing name: EXIST; UNCHECKED: the same file.
    assert c.create(bfh, "g", how=1)[0] == rpc3.NFS3ERR_EXIST
    st, fh2 = c.create(bfh, "g", how=0)
    assert st == 0 and fh2 == fh
    # EXCLUSIVE: a retransmission with the same verifier gets the same file.
    excl = Packer().opaque(bfh).string("x").u32(2).fopaque(b"12345678").bytes()
    st, u = c.nfs(rpc3.CREATE, excl)
    assert st == 0
    xfh = u.post_op_fh()
    st, u = c.nfs(rpc3.CREATE, excl)
    assert st == 0 and u.post_op_fh() == xfh
    excl2 = Packer().opaque(bfh).string("x").u32(2).fopaque(b"87654321").bytes()
    assert c.nfs(rpc3.CREATE, excl2)[0] == rpc3.NFS3ERR_EXIST
    # MKNOD: BADTYPE for devices, NOTSUPP for FIFOs.
    chr_args = Packer().opaque(bfh).string("c").u32(4).raw(rpc3.sattr3()).u32(1).u32(1).bytes()
    assert c.nfs(rpc3.MKNOD, chr_args)[0] == rpc3.NFS3ERR_BADTYPE
    fifo_args = Packer().opaque(bfh).string("p").u32(7).raw(rpc3.sattr3()).bytes()
    assert c.nfs(rpc3.MKNOD, fifo_args)[0] == rpc3.NFS3ERR_NOTSUPP
    # Names: too long, "." / ".." refused where they make no sense.
    assert c.mkdir(bfh, "n" * 256)[0] == rpc3.NFS3ERR_NAMETOOLONG
    rmdir_dot = Packer().opaque(bfh).string(".").bytes()
    assert c.nfs(rpc3.RMDIR, rmdir_dot)[0] == rpc3.NFS3ERR_INVAL
    c.close()


def test_lookup_dotdot_stays_in_export(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, fh = c.lookup(root, "..")
    assert st == 0 and fh == root
    st, fh = c.lookup(root, ".")
    assert st == 0 and fh == root
    c.close()


# ---------------------------------------------------------------- handles

def test_forged_and_malformed_handles(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    assert c.getattr(root)[0] == 0
    for i in range(len(root)):
        bad = bytearray(root)
        bad[i] ^= 0x01
        st, _ = c.getattr(bytes(bad))
        assert st in (rpc3.NFS3ERR_STALE, rpc3.NFS3ERR_BADHANDLE), (i, st)
        if i >= 4:
            assert st == rpc3.NFS3ERR_STALE, f"byte {i}: a forged handle is STALE"
    assert c.getattr(root[:-1])[0] == rpc3.NFS3ERR_BADHANDLE
    assert c.getattr(b"")[0] == rpc3.NFS3ERR_BADHANDLE
    assert c.getattr(b"\0" * 64)[0] == rpc3.NFS3ERR_BADHANDLE
    # Another tenant id in the handle (bytes 8..11) never resolves.
    other = bytearray(root)
    other[8:12] = struct.pack(">I", 2)
    assert c.getattr(bytes(other))[0] == rpc3.NFS3ERR_STALE
    c.close()


# ---------------------------------------------------------------- RPC layer

def assert_alive(port):
    c = RpcConn(port)
    assert c.call(NFS_PROG, 3, rpc3.NULL).accept_stat == rpc3.SUCCESS
    c.close()


def test_rpc_error_replies(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    r = c.call(100227, 3, 0)  # NFS_ACL is not served
    assert r.accepted and r.accept_stat == rpc3.PROG_UNAVAIL
    r = c.call(NFS_PROG, 4, 0)
    assert r.accept_stat == rpc3.PROG_MISMATCH and r.mismatch == (3, 3)
    r = c.call(MNT_PROG, 1, 0)
    assert r.accept_stat == rpc3.PROG_MISMATCH and r.mismatch == (3, 3)
    r = c.call(NFS_PROG, 3, 22)
    assert r.accept_stat == rpc3.PROC_UNAVAIL
    r = c.call(MNT_PROG, 3, 6)
    assert r.accept_stat == rpc3.PROC_UNAVAIL
    r = c.call(NFS_PROG, 3, rpc3.GETATTR, b"\0\0\0")  # truncated nfs_fh3
    assert r.accept_stat == rpc3.GARBAGE_ARGS
    r = c.call(NFS_PROG, 3, rpc3.LOOKUP, Packer().u32(100).bytes())  # handle longer than 64
    assert r.accept_stat == rpc3.GARBAGE_ARGS
    r = c.call(NFS_PROG, 3, rpc3.NULL, rpcvers=3)
    assert not r.accepted and r.reject_stat == 0 and r.mismatch == (2, 2)
    r = c.call(NFS_PROG, 3, rpc3.NULL, cred=(6, b"gss-token"))
    assert not r.accepted and r.auth_stat == rpc3.AUTH_TOOWEAK
    r = c.call(NFS_PROG, 3, rpc3.NULL, cred=(rpc3.AUTH_SYS, b"\0\0\0\0"))
    assert not r.accepted and r.auth_stat == rpc3.AUTH_BADCRED
    # The connection is still usable after all of these.
    assert c.call(NFS_PROG, 3, rpc3.NULL).accept_stat == rpc3.SUCCESS
    # AUTH_NONE is accepted (anonymous).
    cn = RpcConn(s3nfsd.nfs_port, cred=(rpc3.AUTH_NONE, b""))
    assert cn.call(NFS_PROG, 3, rpc3.NULL).accept_stat == rpc3.SUCCESS
    cn.close()
    c.close()


def expect_closed(conn):
    conn.sock.settimeout(10)
    try:
        data = conn.sock.recv(100)
        assert data == b"", f"unexpected reply {data!r}"
    except ConnectionResetError:
        pass


def test_garbage_and_oversize_close_the_connection(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    # A REPLY message where a call is expected.
    c.send_raw(RpcConn.record(Packer().u32(1).u32(1).u32(0).bytes()))
    expect_closed(c)
    c.close()
    c = RpcConn(s3nfsd.nfs_port)
    c.send_raw(struct.pack(">I", 0x80000000 | (64 << 20)) + b"x" * 1000)
    expect_closed(c)
    c.close()
    # Fragments that add up past the limit.
    c = RpcConn(s3nfsd.nfs_port)
    frag = b"\0" * (1 << 20)
    try:
        for _ in range(6):
            c.send_raw(struct.pack(">I", len(frag)) + frag)
    except (BrokenPipeError, ConnectionResetError):
        pass
    expect_closed(c)
    c.close()
    assert "closing" in s3nfsd.tail(200)
    assert_alive(s3nfsd.nfs_port)


def test_multi_fragment_record(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    r = c.call(NFS_PROG, 3, rpc3.GETATTR, Packer().opaque(root).bytes(), frags=7)
    assert r.accept_stat == rpc3.SUCCESS and r.body.u32() == 0
    c.close()


def test_pipelined_calls_all_answered(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, bfh = c.mkdir(root, bucket_name())
    st, fh = c.create(bfh, "big")
    for i in range(4):
        assert c.write(fh, i << 20, bytes([i]) * (1 << 20))[0] == 0
    xids, out = set(), []
    for i in range(64):
        if i % 3 == 0:
            xid, msg = c.call_bytes(NFS_PROG, 3, rpc3.READ,
                                    Packer().opaque(fh).u64((i % 4) << 20).u32(1 << 20).bytes())
        elif i % 3 == 1:
            xid, msg = c.call_bytes(NFS_PROG, 3, rpc3.GETATTR, Packer().opaque(root).bytes())
        else:
            xid, msg = c.call_bytes(NFS_PROG, 3, rpc3.NULL)
        xids.add(xid)
        out.append(RpcConn.record(msg))
    c.send_raw(b"".join(out))
    got = set()
    for _ in range(64):
        r = c.recv_reply()
        assert r.accept_stat == rpc3.SUCCESS
        got.add(r.xid)
    assert got == xids
    c.close()


def test_duplicate_request_cache(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, bfh = c.mkdir(root, bucket_name())
    xid = 0x5eed0001
    args = Packer().opaque(bfh).string("once").raw(rpc3.sattr3(0o755)).bytes()
    r1 = c.call(NFS_PROG, 3, rpc3.MKDIR, args, xid=xid)
    assert r1.body.u32() == 0
    r2 = c.call(NFS_PROG, 3, rpc3.MKDIR, args, xid=xid)
    assert r2.raw == r1.raw, "a retransmission gets the first reply"
    c.close()
    # After a reconnect (new source port) too.
    c = RpcConn(s3nfsd.nfs_port)
    r3 = c.call(NFS_PROG, 3, rpc3.MKDIR, args, xid=xid)
    assert r3.raw == r1.raw
    # A new xid executes again.
    assert c.call(NFS_PROG, 3, rpc3.MKDIR, args).body.u32() == rpc3.NFS3ERR_EXIST
    # REMOVE retransmitted: OK twice, not NOENT the second time.
    st, _ = c.create(bfh, "victim")
    rargs = Packer().opaque(bfh).string("victim").bytes()
    assert c.call(NFS_PROG, 3, rpc3.REMOVE, rargs, xid=0x5eed0002).body.u32() == 0
    assert c.call(NFS_PROG, 3, rpc3.REMOVE, rargs, xid=0x5eed0002).body.u32() == 0
    assert c.call(NFS_PROG, 3, rpc3.REMOVE, rargs).body.u32() == rpc3.NFS3ERR_NOENT
    c.close()


# ---------------------------------------------------------------- tenants

def admin(daemon, method, path, body=None):
    import json
    import urllib.request
    req = urllib.request.Request(daemon.admin_endpoint + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {daemon.admin_token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            data = r.read()
            return r.status, (json.loads(data) if data else None)
    except urllib.error.HTTPError as e:
        return e.code, None
    except urllib.error.URLError:
        return None, None


def make_tenant_export(daemon, name, path, nets=("127.0.0.0/8",), **flags):
    """Create a tenant and an export of its root through the admin API, or skip."""
    st, t = admin(daemon, "POST", "/api/v1/tenants", {"name": name})
    if st in (None, 404, 405, 501) or t is None:
        pytest.skip(f"admin API for tenants not available (POST /api/v1/tenants -> {st})")
    assert st in (200, 201), st
    tid = t.get("id")
    body = {"path": path, "clients": list(nets)}
    body.update(flags)
    st, e = admin(daemon, "POST", f"/api/v1/tenants/{tid}/exports", body)
    if st in (None, 404, 405, 501):
        pytest.skip(f"admin API for exports not available (-> {st})")
    assert st in (200, 201), st
    return tid, e


def test_two_tenants_cannot_reach_each_other(s3nfsd, nfs3_client):
    make_tenant_export(s3nfsd, "tenant-b", "/tenant-b")
    c = RpcConn(s3nfsd.nfs_port)
    a_root = root_fh(c, "/")
    b_root = root_fh(c, "/tenant-b")
    assert a_root != b_root
    b_bucket = bucket_name()
    st, b_bfh = c.mkdir(b_root, b_bucket)
    assert st == 0
    # Tenant A's root does not show B's bucket, by name or by "..".
    assert c.lookup(a_root, b_bucket)[0] == rpc3.NFS3ERR_NOENT
    assert c.lookup(b_root, "..")[1] == b_root
    # A handle of B relabelled with A's export id (or the reverse) never resolves.
    forged = bytearray(b_bfh)
    forged[4:12] = a_root[4:12]
    assert c.getattr(bytes(forged))[0] == rpc3.NFS3ERR_STALE
    # One RENAME across the two exports: XDEV or STALE, never success.
    st, a_bfh = c.mkdir(a_root, bucket_name())
    st, _ = c.create(a_bfh, "f")
    args = Packer().opaque(a_bfh).string("f").opaque(b_bfh).string("f").bytes()
    assert c.nfs(rpc3.RENAME, args)[0] in (rpc3.NFS3ERR_XDEV, rpc3.NFS3ERR_STALE)
    c.close()
    url = f"nfs://127.0.0.1/?version=3&nfsport={s3nfsd.nfs_port}&mountport={s3nfsd.nfs_port}"
    run_client(nfs3_client, s3nfsd, "isolated", b_bucket, url=url)


def test_export_not_admitting_client_is_refused(s3nfsd):
    make_tenant_export(s3nfsd, "tenant-far", "/far", nets=("10.99.0.0/16",))
    c = RpcConn(s3nfsd.nfs_port)
    assert c.mnt("/far")[0] in (2, 13)  # NOENT or ACCES, never a handle
    assert all(e[0] != "/far" for e in c.mnt_list(rpc3.MNT_EXPORT))
    c.close()


def test_readonly_and_root_squash_exports(s3nfsd):
    make_tenant_export(s3nfsd, "tenant-ro", "/tenant-ro", read_only=True)
    make_tenant_export(s3nfsd, "tenant-sq", "/tenant-sq", root_squash=True, anon_uid=4321,
                       anon_gid=4322)
    c = RpcConn(s3nfsd.nfs_port)  # AUTH_SYS uid 0
    ro = root_fh(c, "/tenant-ro")
    assert c.mkdir(ro, bucket_name())[0] == rpc3.NFS3ERR_ROFS
    setattr_args = Packer().opaque(ro).raw(rpc3.sattr3(mode=0o700)).u32(0).bytes()
    assert c.nfs(rpc3.SETATTR, setattr_args)[0] == rpc3.NFS3ERR_ROFS
    st, u = c.nfs(rpc3.ACCESS, Packer().opaque(ro).u32(0x3f).bytes())
    assert st == 0
    u.post_op_attr()
    granted = u.u32()
    assert granted & (0x04 | 0x08 | 0x10) == 0, "read-only: no MODIFY/EXTEND/DELETE"
    assert granted & 0x02, "LOOKUP still allowed"
    sq = root_fh(c, "/tenant-sq")
    st, bfh = c.mkdir(sq, bucket_name())
    if st == 0:
        assert c.getattr(bfh)[1]["uid"] == 4321, "root is squashed to the anonymous uid"
    else:
        assert st == rpc3.NFS3ERR_ACCES, "squashed root may not write the tenant root"
    c.close()


def test_fsstat_reports_quota_and_dquot(s3nfsd):
    tid, _ = make_tenant_export(s3nfsd, "tenant-q", "/tenant-q")
    st, _ = admin(s3nfsd, "PUT", f"/api/v1/tenants/{tid}/quota",
                  {"bytes_limit": 4 << 20, "inodes_limit": 50})
    if st in (404, 405, 501):
        pytest.skip(f"quota API not available ({st})")
    assert st in (200, 204), st
    c = RpcConn(s3nfsd.nfs_port)
    q = root_fh(c, "/tenant-q")
    st, fs = c.fsstat(q)
    assert st == 0 and fs["tbytes"] == 4 << 20 and fs["tfiles"] == 50
    assert fs["fbytes"] <= 4 << 20 and fs["ffiles"] <= 50
    st, bfh = c.mkdir(q, bucket_name())
    assert st == 0
    st, fh = c.create(bfh, "fill")
    assert st == 0
    status = 0
    for i in range(8):
        status, _ = c.write(fh, i << 20, b"z" * (1 << 20))
        if status:
            break
    assert status == 69, f"writing past the byte quota answers NFS3ERR_DQUOT, got {status}"
    st, fs = c.fsstat(q)
    assert st == 0 and fs["fbytes"] < 4 << 20
    c.close()


def test_rpcbind_registration(tmp_path):
    """nfs_register_rpcbind: registered at start, unregistered at stop (private netns)."""
    from s3nfsd_harness import BIN
    if os.geteuid() != 0 or not shutil.which("rpcbind") or not shutil.which("unshare"):
        pytest.skip("needs root, rpcbind and unshare (a private network namespace)")
    if not os.access(BIN, os.X_OK):
        pytest.skip(f"s3nfsd not built at {BIN}")
    p = subprocess.run(["unshare", "--net", "--mount", os.path.join(HERE, "rpcbind_check.sh"),
                        BIN, str(tmp_path)], capture_output=True, text=True, timeout=120)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    assert p.returncode == 0 and "RPCBIND OK" in p.stdout, p.stdout + p.stderr + log


def test_no_rpcbind_is_only_logged(tmp_path):
    """Without a portmapper the daemon still serves (failure is a log line)."""
    from s3nfsd_harness import BIN
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (a private network namespace without rpcbind)")
    script = (f'ip link set lo up; S3NFS_ACCESS_KEY=AKIANORPCBIND S3NFS_SECRET_KEY=norpcbind-key '
              f'"{BIN}" --foreground --data-dir "{tmp_path}/data" --s3-listen 127.0.0.1:24000 '
              f'--nfs-listen 127.0.0.1:24049 --admin-listen 127.0.0.1:24001 '
              f'--set nfs_register_rpcbind=true --set data_file_size=256MiB '
              f'> "{tmp_path}/log" 2>&1 & D=$!; '
              f'for i in $(seq 100); do grep -q "ready" "{tmp_path}/log" && break; '
              f'sleep 0.1; done; '
              f'kill -0 $D && kill $D; wait $D')
    p = subprocess.run(["unshare", "--net", "bash", "-c", script], capture_output=True,
                       text=True, timeout=120)
    log = (tmp_path / "log").read_text()
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    assert "no rpcbind" in log and "listening on" in log, log


# ---------------------------------------------------------------- NLM / NSM

NLM_PROG, NSM_PROG = 100021, 100024
NLM4_GRANTED, NLM4_DENIED, NLM4_BLOCKED, NLM4_STALE_FH = 0, 1, 3, 7


def nlm_lock_obj(host, fh, svid, off, length):
    return (Packer().string(host).opaque(fh).opaque(f"{svid}@{host}".encode()).u32(svid)
            .u64(off).u64(length).bytes())


def nlm_call(c, proc, args):
    r = c.call(NLM_PROG, 4, proc, args)
    assert r.accepted and r.accept_stat == rpc3.SUCCESS, vars(r)
    return r.body


def nlm_lock(c, host, fh, svid, off, length, excl=True, block=False, cookie=b"ck"):
    args = (Packer().opaque(cookie).u32(int(block)).u32(int(excl))
            .raw(nlm_lock_obj(host, fh, svid, off, length)).u32(0).u32(1).bytes())
    u = nlm_call(c, 2, args)
    assert u.opaque() == cookie, "the cookie comes back"
    return u.u32()


def nlm_unlock(c, host, fh, svid, off, length):
    u = nlm_call(c, 4, Packer().opaque(b"u").raw(nlm_lock_obj(host, fh, svid, off, length)).bytes())
    u.opaque()
    return u.u32()


def nlm_test(c, host, fh, svid, off, length, excl=True):
    u = nlm_call(c, 1, Packer().opaque(b"t").u32(int(excl))
                 .raw(nlm_lock_obj(host, fh, svid, off, length)).bytes())
    u.opaque()
    st = u.u32()
    if st != NLM4_DENIED:
        return st, None
    return st, {"exclusive": u.u32(), "svid": u.u32(), "oh": u.opaque(), "offset": u.u64(),
                "len": u.u64()}


def test_nlm_byte_range_locks(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, bfh = c.mkdir(root, bucket_name())
    st, fh = c.create(bfh, "locked")
    assert st == 0
    assert c.call(NLM_PROG, 4, 0).accept_stat == rpc3.SUCCESS
    assert nlm_lock(c, "hostA", fh, 11, 0, 100) == NLM4_GRANTED
    assert nlm_lock(c, "hostB", fh, 22, 50, 10) == NLM4_DENIED
    assert nlm_lock(c, "hostB", fh, 22, 50, 10, block=True) == NLM4_BLOCKED
    st, h = nlm_test(c, "hostB", fh, 22, 99, 1)
    assert st == NLM4_DENIED and h["svid"] == 11 and h["offset"] == 0 and h["len"] == 100
    assert h["exclusive"] == 1 and h["oh"] == b"11@hostA"
    assert nlm_test(c, "hostB", fh, 22, 100, 0)[0] == NLM4_GRANTED, "adjacent range is free"
    # Shared locks of two owners coexist where no exclusive lock is.
    assert nlm_lock(c, "hostB", fh, 22, 200, 10, excl=False) == NLM4_GRANTED
    assert nlm_lock(c, "hostC", fh, 33, 205, 10, excl=False) == NLM4_GRANTED
    assert nlm_lock(c, "hostC", fh, 33, 200, 1, excl=True) == NLM4_DENIED
    # Unlock, then the other owner gets it.
    assert nlm_unlock(c, "hostA", fh, 11, 0, 100) == NLM4_GRANTED
    assert nlm_lock(c, "hostB", fh, 22, 50, 10) == NLM4_GRANTED
    # FREE_ALL of hostB releases its locks.
    nlm_call(c, 23, Packer().string("hostB").u32(3).bytes())
    assert nlm_lock(c, "hostA", fh, 11, 0, 100) == NLM4_GRANTED
    # SM_NOTIFY: hostA rebooted, its locks go.
    r = c.call(NSM_PROG, 1, 6, Packer().string("hostA").u32(5).bytes())
    assert r.accept_stat == rpc3.SUCCESS
    assert nlm_lock(c, "hostB", fh, 22, 0, 100) == NLM4_GRANTED
    # A bad handle, another version, unsupported procedures.
    bad = bytearray(fh)
    bad[20] ^= 1
    assert nlm_lock(c, "hostB", bytes(bad), 22, 0, 1) == NLM4_STALE_FH
    r = c.call(NLM_PROG, 3, 0)
    assert r.accept_stat == rpc3.PROG_MISMATCH and r.mismatch == (4, 4)
    assert c.call(NLM_PROG, 4, 20).accept_stat == rpc3.PROC_UNAVAIL  # SHARE
    r = c.call(NSM_PROG, 1, 1, Packer().string("me").bytes())  # SM_STAT
    assert r.accept_stat == rpc3.SUCCESS
    assert r.body.u32() == 1 and r.body.u32() % 2 == 1
    c.close()
    # Locks are kept in memory, the hosts that hold them in the store; a restart
    # opens a grace period for reclaims (test_nlm_restart.py), here none
    # (nlm_grace_period = 0): the locks are gone and a reclaim is refused.
    s3nfsd.extra_args += ["--set", "nlm_grace_period=0"]
    s3nfsd.restart()
    c = RpcConn(s3nfsd.nfs_port)
    assert nlm_lock(c, "hostZ", fh, 99, 0, 100) == NLM4_GRANTED
    args = (Packer().opaque(b"r").u32(0).u32(1).raw(nlm_lock_obj("hostB", fh, 22, 0, 100))
            .u32(1).u32(1).bytes())  # reclaim = true
    u = nlm_call(c, 2, args)
    u.opaque()
    assert u.u32() == 4  # NLM4_DENIED_GRACE_PERIOD: no grace period now
    c.close()


def test_nlm_free_all_and_notify_only_from_the_lock_holder(s3nfsd):
    """FREE_ALL and SM_NOTIFY name a host; only the address its locks were
    taken from may release them. A spoofed one from another loopback address
    (127.0.0.3 for hostV, which locked from 127.0.0.2) releases nothing, even
    after the spoofer took a lock in hostV's name itself, and is logged."""
    victim = RpcConn(s3nfsd.nfs_port, source="127.0.0.2")
    spoof = RpcConn(s3nfsd.nfs_port, source="127.0.0.3")
    st, bfh = victim.mkdir(root_fh(victim), bucket_name())
    st, fh = victim.create(bfh, "held")
    st, fh2 = victim.create(bfh, "other")
    assert st == 0
    assert nlm_lock(victim, "hostV", fh, 7, 0, 100) == NLM4_GRANTED
    # NM_LOCK (unmonitored: the host is not remembered) from the victim too
    nm = (Packer().opaque(b"nm").u32(0).u32(1).raw(nlm_lock_obj("hostW", fh, 8, 200, 10))
          .u32(0).u32(1).bytes())
    u = nlm_call(victim, 22, nm)
    u.opaque()
    assert u.u32() == NLM4_GRANTED

    def held(off):  # is the range still locked? (hostX's try would conflict)
        return nlm_lock(spoof, "hostX", fh, 9, off, 10) == NLM4_DENIED

    nlm_call(spoof, 23, Packer().string("hostV").u32(3).bytes())  # FREE_ALL
    r = spoof.call(NSM_PROG, 1, 6, Packer().string("hostV").u32(5).bytes())  # SM_NOTIFY
    assert r.accept_stat == rpc3.SUCCESS
    nlm_call(spoof, 23, Packer().string("hostW").u32(3).bytes())
    assert held(0) and held(200), "a spoofed FREE_ALL/SM_NOTIFY released locks"
    # The spoofer locks in hostV's name (the host record now names its address):
    # its own FREE_ALL then releases only that lock, never the victim's.
    assert nlm_lock(spoof, "hostV", fh2, 70, 0, 10) == NLM4_GRANTED
    nlm_call(spoof, 23, Packer().string("hostV").u32(3).bytes())
    assert held(0)
    assert nlm_lock(victim, "hostY", fh2, 71, 0, 10) == NLM4_GRANTED, "the spoofer's own went"
    log = open(s3nfsd.log_path, errors="replace").read()
    assert "NLM FREE_ALL for hostV from 127.0.0.3" in log and "refused" in log, s3nfsd.tail()
    assert "NLM SM_NOTIFY (state 5) for hostV from 127.0.0.3 refused" in log, s3nfsd.tail()
    # From the address they came from, FREE_ALL and SM_NOTIFY do release them.
    r = victim.call(NSM_PROG, 1, 6, Packer().string("hostV").u32(7).bytes())
    assert r.accept_stat == rpc3.SUCCESS
    nlm_call(victim, 23, Packer().string("hostW").u32(3).bytes())
    assert nlm_lock(spoof, "hostX", fh, 9, 0, 10) == NLM4_GRANTED
    assert nlm_lock(spoof, "hostX", fh, 9, 200, 10) == NLM4_GRANTED
    victim.close()
    spoof.close()


def test_qos_throttle_answers_jukebox(daemon_factory):
    d = daemon_factory(extra_args=["--set", "qos_queue_max=1", "--set",
                                   "data_file_size=512MiB"]).start()
    st, _ = admin(d, "PUT", "/api/v1/tenants/1/qos", {"meta_iops": 1})
    if st in (None, 404, 405, 501):
        pytest.skip(f"QoS admin API not available ({st})")
    assert st in (200, 204), st
    c = RpcConn(d.nfs_port)
    root = root_fh(c)
    xids, out = set(), []
    for _ in range(30):
        xid, msg = c.call_bytes(NFS_PROG, 3, rpc3.GETATTR, Packer().opaque(root).bytes())
        xids.add(xid)
        out.append(RpcConn.record(msg))
    c.send_raw(b"".join(out))
    stats, got = [], set()
    for _ in range(30):
        r = c.recv_reply()
        got.add(r.xid)
        stats.append(r.body.u32())
    assert got == xids, "every call is answered"
    assert 10008 in stats, "calls over the tenant's rate, with the queue full, get JUKEBOX"
    assert 0 in stats
    # MOUNT and NULL are not subject to QoS.
    assert c.call(NFS_PROG, 3, rpc3.NULL).accept_stat == rpc3.SUCCESS
    assert c.mnt("/")[0] == 0
    st, _ = admin(d, "DELETE", "/api/v1/tenants/1/qos")
    assert st in (200, 204), st
    assert all(c.getattr(root)[0] == 0 for _ in range(20))
    c.close()


# ---------------------------------------------------------------- both protocols

def nfs_walk(c, root, path):
    fh = root
    for part in path.split("/"):
        st, fh = c.lookup(fh, part)
        assert st == 0, f"LOOKUP {part} of {path} -> {st}"
    return fh


def test_cross_protocol_s3_and_nfs(s3nfsd):
    import hashlib
    s3 = s3nfsd.boto3()
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    body = os.urandom(300000)
    s3.put_object(Bucket=b, Key="dir/sub/obj.bin", Body=body)
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    fh = nfs_walk(c, root, f"{b}/dir/sub/obj.bin")
    got, off = b"", 0
    while True:
        st, (data, eof, n) = c.read(fh, off, 1 << 20)
        assert st == 0
        got += data
        off += n
        if eof:
            break
    assert got == body, "an S3 object reads back byte for byte over NFS"
    # Written sequentially over NFS, read over S3 with an MD5 ETag.
    bfh = nfs_walk(c, root, b)
    st, nfh = c.create(bfh, "from-nfs.txt")
    payload = b"written over NFS\n" * 1000
    assert c.write(nfh, 0, payload)[0] == 0
    obj = s3.get_object(Bucket=b, Key="from-nfs.txt")
    assert obj["Body"].read() == payload
    assert obj["ETag"].strip('"') == hashlib.md5(payload).hexdigest()
    # An NFS rename is visible to S3 listings at once.
    args = Packer().opaque(bfh).string("from-nfs.txt").opaque(bfh).string("renamed.txt").bytes()
    assert c.nfs(rpc3.RENAME, args)[0] == 0
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]]
    assert "renamed.txt" in keys and "from-nfs.txt" not in keys
    # S3 delete, then NFS: the handle is stale, and the implicit parents went with it.
    s3.delete_object(Bucket=b, Key="dir/sub/obj.bin")
    assert c.getattr(fh)[0] == rpc3.NFS3ERR_STALE
    assert c.lookup(bfh, "dir")[0] == rpc3.NFS3ERR_NOENT
    c.close()


def test_committed_writes_survive_kill9(s3nfsd):
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, bfh = c.mkdir(root, bucket_name())
    st, fh = c.create(bfh, "durable.bin")
    data = os.urandom(2 << 20)
    verfs = set()
    for off in range(0, len(data), 256 << 10):
        st, w = c.write(fh, off, data[off:off + (256 << 10)], stable=0)
        assert st == 0
        verfs.add(w["verf"])
    st, u = c.nfs(rpc3.COMMIT, Packer().opaque(fh).u64(0).u32(0).bytes())
    assert st == 0
    u.wcc()
    verf = u.fopaque(8)
    assert verfs == {verf}
    # More UNSTABLE data, never committed: the client would keep it to resend.
    assert c.write(fh, len(data), b"x" * 4096, stable=0)[0] == 0
    c.close()
    s3nfsd.kill()
    s3nfsd.start()
    c = RpcConn(s3nfsd.nfs_port)
    got, off = b"", 0
    while off < len(data):
        st, (chunk, eof, n) = c.read(fh, off, 1 << 20)
        assert st == 0 and n > 0
        got += chunk
        off += n
    assert got[:len(data)] == data, "committed data survives kill -9"
    st, w = c.write(fh, len(data), b"y" * 4096, stable=2)
    assert st == 0 and w["verf"] != verf, "a new verifier tells the client to resend"
    c.close()


# ---------------------------------------------------------------- robustness

def test_mutated_calls_never_crash_the_server(s3nfsd):
    """Valid calls of every NFS, MOUNT, NLM and NSM procedure with random bytes
    flipped or cut off: every call gets an answer or the connection is closed,
    and the server keeps serving (run under ASan in CI)."""
    import random
    rng = random.Random(1813)
    c = RpcConn(s3nfsd.nfs_port)
    root = root_fh(c)
    st, bfh = c.mkdir(root, bucket_name())
    st, ffh = c.create(bfh, "victim")
    c.write(ffh, 0, b"data" * 100)
    c.close()
    sa = rpc3.sattr3(0o644, 10)
    P = Packer
    templates = [
        (NFS_PROG, 3, p, a) for p, a in [
            (rpc3.GETATTR, P().opaque(ffh).bytes()),
            (rpc3.SETATTR, P().opaque(ffh).raw(sa).u32(0).bytes()),
            (rpc3.LOOKUP, P().opaque(bfh).string("victim").bytes()),
            (rpc3.ACCESS, P().opaque(ffh).u32(0x3f).bytes()),
            (rpc3.READLINK, P().opaque(ffh).bytes()),
            (rpc3.READ, P().opaque(ffh).u64(0).u32(4096).bytes()),
            (rpc3.WRITE, P().opaque(ffh).u64(3).u32(8).u32(0).opaque(b"abcdefgh").bytes()),
            (rpc3.CREATE, P().opaque(bfh).string("c1").u32(0).raw(sa).bytes()),
            (rpc3.MKDIR, P().opaque(bfh).string("d1").raw(sa).bytes()),
            (rpc3.SYMLINK, P().opaque(bfh).string("s1").raw(sa).string("victim").bytes()),
            (rpc3.MKNOD, P().opaque(bfh).string("n1").u32(7).raw(sa).bytes()),
            (rpc3.REMOVE, P().opaque(bfh).string("c1").bytes()),
            (rpc3.RMDIR, P().opaque(bfh).string("d1").bytes()),
            (rpc3.RENAME, P().opaque(bfh).string("s1").opaque(bfh).string("s2").bytes()),
            (rpc3.LINK, P().opaque(ffh).opaque(bfh).string("l1").bytes()),
            (rpc3.READDIR, P().opaque(bfh).u64(0).fopaque(b"\0" * 8).u32(4096).bytes()),
            (rpc3.READDIRPLUS, P().opaque(bfh).u64(0).fopaque(b"\0" * 8).u32(1024).u32(8192)
             .bytes()),
            (rpc3.FSSTAT, P().opaque(root).bytes()),
            (rpc3.FSINFO, P().opaque(root).bytes()),
            (rpc3.PATHCONF, P().opaque(root).bytes()),
            (rpc3.COMMIT, P().opaque(ffh).u64(0).u32(0).bytes()),
        ]
    ] + [
        (MNT_PROG, 3, rpc3.MNT_MNT, P().string("/").bytes()),
        (MNT_PROG, 3, rpc3.MNT_UMNT, P().string("/").bytes()),
        (NLM_PROG, 4, 2, P().opaque(b"c").u32(1).u32(1).raw(nlm_lock_obj("h", ffh, 1, 0, 9))
         .u32(0).u32(1).bytes()),
        (NLM_PROG, 4, 1, P().opaque(b"c").u32(1).raw(nlm_lock_obj("h", ffh, 2, 0, 9)).bytes()),
        (NLM_PROG, 4, 4, P().opaque(b"c").raw(nlm_lock_obj("h", ffh, 1, 0, 9)).bytes()),
        (NLM_PROG, 4, 23, P().string("h").u32(1).bytes()),
        (NSM_PROG, 1, 6, P().string("h").u32(3).bytes()),
    ]
    answered = closed = 0
    c = RpcConn(s3nfsd.nfs_port)
    for batch in range(40):
        out = []
        for _ in range(50):
            prog, vers, proc, args = rng.choice(templates)
            a = bytearray(args)
            for _ in range(rng.randint(1, 4)):
                if a:
                    a[rng.randrange(len(a))] = rng.randrange(256)
            if rng.random() < 0.3:
                a = a[:rng.randrange(len(a) + 1)]
            out.append(RpcConn.record(c.call_bytes(prog, vers, proc, bytes(a))[1]))
        try:
            c.send_raw(b"".join(out))
            for _ in range(50):
                c.recv_reply()
                answered += 1
        except (ConnectionError, OSError):
            closed += 1
            c.close()
            c = RpcConn(s3nfsd.nfs_port)
    c.close()
    print(f"answered {answered}, connections closed {closed}")
    assert answered > 1000, (answered, closed)
    assert_alive(s3nfsd.nfs_port)
    c = RpcConn(s3nfsd.nfs_port)
    assert c.getattr(root)[0] == 0
    c.close()


def test_export_of_a_bucket_is_confined(s3nfsd):
    tid, _ = make_tenant_export(s3nfsd, "tenant-sub", "/tenant-sub")
    c = RpcConn(s3nfsd.nfs_port)
    troot = root_fh(c, "/tenant-sub")
    b = bucket_name()
    st, bfh = c.mkdir(troot, b)
    assert st == 0
    st, sub = c.mkdir(bfh, "inner")
    assert st == 0
    ino = c.getattr(bfh)[1]["fileid"]
    st, e = admin(s3nfsd, "POST", f"/api/v1/tenants/{tid}/exports",
                  {"path": "/tenant-sub/only-bucket", "clients": ["127.0.0.0/8"], "dir": ino})
    assert st in (200, 201), st
    st, (efh, _) = c.mnt("/tenant-sub/only-bucket")
    assert st == 0
    attr = c.getattr(efh)[1]
    assert attr["fileid"] == ino and attr["type"] == 2
    assert attr["fsid"] != c.getattr(bfh)[1]["fsid"], "each export is its own file system"
    # ".." of the exported bucket is the bucket itself, never the tenant root.
    assert c.lookup(efh, "..")[1] == efh
    st, inner = c.lookup(efh, "inner")
    assert st == 0
    assert c.lookup(inner, "..")[1] == efh
    st, fh = c.create(efh, "f")
    assert st == 0 and c.write(fh, 0, b"hello")[0] == 0
    # The same inode seen through the other export has another handle; both work.
    st, fh2 = c.lookup(bfh, "f")
    assert st == 0 and fh2 != fh and c.getattr(fh2)[1]["fileid"] == c.getattr(fh)[1]["fileid"]
    # RENAME between the two exports of one tenant: XDEV.
    args = Packer().opaque(efh).string("f").opaque(bfh).string("g").bytes()
    assert c.nfs(rpc3.RENAME, args)[0] == rpc3.NFS3ERR_XDEV
    c.close()


def test_nlm_granted_callbacks(tmp_path):
    """Blocked requests are granted with a GRANTED callback through the client's
    portmapper; a refused grant is released; CANCEL and FREE_ALL forget requests.
    Runs in a private network namespace (a fake client lives on 127.0.0.2)."""
    from s3nfsd_harness import BIN
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (a private network namespace)")
    if not os.access(BIN, os.X_OK):
        pytest.skip(f"s3nfsd not built at {BIN}")
    p = subprocess.run(["unshare", "--net", sys.executable,
                        os.path.join(HERE, "nlm_callback_check.py"), BIN, str(tmp_path)],
                       capture_output=True, text=True, timeout=180)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    assert p.returncode == 0 and "NLM CALLBACK OK" in p.stdout, \
        p.stdout + p.stderr + log[-3000:]


# ---------------------------------------------------------------- MNT below an export

def symlink(c, dfh, name, target):
    args = Packer().opaque(dfh).string(name).raw(rpc3.sattr3()).string(target).bytes()
    return c.nfs(rpc3.SYMLINK, args)[0]


def test_mount_below_an_export(s3nfsd):
    """MNT of a bucket or a directory in it, under the export "/": the export
    with the longest prefix, then a permission-checked walk; files, symbolic
    links and ".." are refused with their own status."""
    c = RpcConn(s3nfsd.nfs_port)  # AUTH_SYS uid 0
    root = root_fh(c, "/")
    b = bucket_name()
    st, bfh = c.mkdir(root, b)
    assert st == 0
    st, sub = c.mkdir(bfh, "sub")
    assert st == 0
    st, f = c.create(sub, "f")
    assert st == 0 and c.write(f, 0, b"below")[0] == 0
    assert symlink(c, bfh, "ln", "sub") == 0
    st, priv = c.mkdir(bfh, "private", mode=0o700)
    assert st == 0 and c.mkdir(priv, "in")[0] == 0

    assert root_fh(c, f"/{b}") == bfh
    assert root_fh(c, f"//{b}/./sub/") == sub, "repeated slashes, '.' and a trailing / ignored"
    st, fh = c.lookup(root_fh(c, f"/{b}/sub"), "f")
    assert st == 0 and c.read(fh, 0, 100)[1][0] == b"below"
    # ".." of a mounted directory leads up, but never out of the export.
    assert c.lookup(sub, "..")[1] == bfh and c.lookup(bfh, "..")[1] == root
    assert c.mnt(f"/{b}/sub/f")[0] == 20, "a file: MNT3ERR_NOTDIR"
    assert c.mnt(f"/{b}/ln")[0] == 20, "a symbolic link is not followed: MNT3ERR_NOTDIR"
    assert c.mnt(f"/{b}/ln/f")[0] == 20
    assert c.mnt(f"/{b}/nosuch")[0] == 2
    assert c.mnt(f"/{b}/sub/../sub")[0] == 22, "'..' refused: MNT3ERR_INVAL"
    assert c.mnt(f"/{b}/" + "n" * 300)[0] == 63, "MNT3ERR_NAMETOOLONG"
    # The walk runs as the caller: uid 1000 may not search the 0700 directory.
    u = RpcConn(s3nfsd.nfs_port, cred=rpc3.auth_sys(uid=1000, gid=1000))
    assert u.mnt(f"/{b}/private/in")[0] == 13, "MNT3ERR_ACCES"
    assert u.mnt(f"/{b}/sub")[0] == 0
    u.close()
    assert c.mnt(f"/{b}/private/in")[0] == 0
    # DUMP lists the normalised path; UMNT of any spelling of it removes it.
    assert ("127.0.0.1", f"/{b}/sub") in c.mnt_list(rpc3.MNT_DUMP)
    c.call(MNT_PROG, 3, rpc3.MNT_UMNT, Packer().string(f"/{b}//sub/").bytes())
    assert ("127.0.0.1", f"/{b}/sub") not in c.mnt_list(rpc3.MNT_DUMP)
    c.close()


def test_mount_below_a_tenant_export_picks_the_longest_prefix(s3nfsd):
    _, e = make_tenant_export(s3nfsd, "tenant-pre", "/tenant-pre")
    c = RpcConn(s3nfsd.nfs_port)
    troot = root_fh(c, "/tenant-pre")
    b = bucket_name()
    st, bfh = c.mkdir(troot, b)
    assert st == 0
    fh = root_fh(c, f"/tenant-pre/{b}")
    assert fh == bfh and fh[4:12] == troot[4:12], "the handle is of the tenant's export"
    # The default tenant's "/" export holds no "tenant-pre": the prefix "/tenant-pre" was used.
    assert c.lookup(root_fh(c, "/"), "tenant-pre")[0] == rpc3.NFS3ERR_NOENT
    assert c.mnt(f"/tenant-pre/{b}/nosuch")[0] == 2
    # A path under an export that does not admit the client, with "/" not
    # holding it either: never a handle.
    make_tenant_export(s3nfsd, "tenant-far2", "/far2", nets=("10.98.0.0/16",))
    assert c.mnt("/far2/x")[0] in (2, 13)
    c.close()


def test_libnfs_urls_into_a_bucket_directory(s3nfsd, tmp_path):
    """nfs-ls, nfs-cat and nfs-cp with URLs naming a bucket's subdirectory
    (libnfs mounts the URL's directory, or the file's parent)."""
    for tool in ("nfs-ls", "nfs-cat", "nfs-cp"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (libnfs-utils)")
    port = s3nfsd.nfs_port
    q = f"?version=3&nfsport={port}&mountport={port}"
    s3 = s3nfsd.boto3()
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="sub/dir/hello.txt", Body=b"hello from s3\n")
    base = f"nfs://127.0.0.1/{b}/sub/dir"

    def run(*args):
        p = subprocess.run(list(args), capture_output=True, timeout=60)
        assert p.returncode == 0, f"{args}: {p.stdout!r} {p.stderr!r}\n{s3nfsd.tail()}"
        return p.stdout

    assert b"hello.txt" in run("nfs-ls", base + q)
    assert b"dir" in run("nfs-ls", f"nfs://127.0.0.1/{b}/sub" + q)
    assert run("nfs-cat", f"{base}/hello.txt" + q) == b"hello from s3\n"
    src = tmp_path / "up.bin"
    data = os.urandom(300 * 1024 + 7)
    src.write_bytes(data)
    run("nfs-cp", str(src), f"{base}/up.bin" + q)
    assert s3.get_object(Bucket=b, Key="sub/dir/up.bin")["Body"].read() == data
    dst = tmp_path / "down.bin"
    run("nfs-cp", f"{base}/up.bin" + q, str(dst))
    assert dst.read_bytes() == data
    # A URL into a directory that does not exist fails cleanly.
    p = subprocess.run(["nfs-cat", f"nfs://127.0.0.1/{b}/nosuch/hello.txt" + q],
                       capture_output=True, timeout=60)
    assert p.returncode != 0


# ---------------------------------------------------------------- READ data paths

def test_read_data_paths(s3nfsd):
    """READ data leaves as core pieces: verified memory on a first read, page-
    cache ranges of the store (sendfile) on a re-read, holes as zeros, XDR
    padding for odd counts. Every path returns the file's bytes, also right
    after an overwrite (pending, then committed) of part of a cached extent."""
    c = RpcConn(s3nfsd.nfs_port)
    st, bfh = c.mkdir(root_fh(c), bucket_name())
    st, fh = c.create(bfh, "f")
    assert st == 0
    data = bytearray(os.urandom(3 * (1 << 20) + 5))
    for off in range(0, len(data), 1 << 20):
        assert c.write(fh, off, bytes(data[off:off + (1 << 20)]), stable=2)[0] == 0

    def check(off, count):
        st, (got, eof, n) = c.read(fh, off, count)
        want = bytes(data[off:off + count])
        assert st == 0 and n == len(want) and got == want, (off, count, n)
        assert eof == (off + count >= len(data))

    spans = [(0, 1 << 20), (1 << 20, 1 << 20), (7, 1000003), (3 << 20, 1 << 20),
             ((3 << 20) + 1, 3), (5, 1), (len(data) - 2, 100)]
    for _ in range(3):  # first read verifies; later ones come from the page cache
        for off, count in spans:
            check(off, count)
    # Overwrite 4 KiB inside the second extent: UNSTABLE (pending), then committed.
    patch = os.urandom(4096)
    data[(1 << 20) + 100:(1 << 20) + 100 + 4096] = patch
    assert c.write(fh, (1 << 20) + 100, patch, stable=0)[0] == 0
    for off, count in spans:
        check(off, count)
    assert c.nfs(rpc3.COMMIT, Packer().opaque(fh).u64(0).u32(0).bytes())[0] == 0
    for _ in range(2):
        for off, count in spans:
            check(off, count)
    # Grow the file by SETATTR: a hole reads as zeros.
    args = Packer().opaque(fh).raw(rpc3.sattr3(size=8 << 20)).u32(0).bytes()
    assert c.nfs(rpc3.SETATTR, args)[0] == 0
    data.extend(bytes((8 << 20) - len(data)))
    for off, count in [(6 << 20, 1 << 20), ((7 << 20) + (1 << 19), 1 << 20),
                       ((3 << 20) - 10, 1 << 20), (len(data) - 1, 7)]:
        check(off, count)
    st, (got, eof, n) = c.read(fh, 9 << 20, 4096)
    assert st == 0 and got == b"" and n == 0 and eof, "past the end: nothing, eof"
    st, (got, eof, n) = c.read(fh, 0, 0)
    assert st == 0 and got == b"" and n == 0 and not eof
    # Pipelined READs of one connection are answered whole, each with its own data.
    xids = {}
    for i, (off, count) in enumerate(spans * 4):
        xid, msg = c.call_bytes(NFS_PROG, 3, rpc3.READ,
                                Packer().opaque(fh).u64(off).u32(count).bytes())
        xids[xid] = (off, count)
        c.send_raw(c.record(msg))
    for _ in range(len(xids)):
        r = c.recv_reply()
        off, count = xids.pop(r.xid)
        assert r.body.u32() == 0
        r.body.post_op_attr()
        n, _ = r.body.u32(), r.body.u32()
        assert r.body.opaque() == bytes(data[off:off + count])[:n]
    c.close()
