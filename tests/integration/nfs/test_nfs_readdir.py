# SPDX-License-Identifier: Apache-2.0
"""READDIR and READDIRPLUS byte for byte (rpc3.py) against a real s3nfsd.

Both procedures share one page builder in the server (nfs/nfs_dir.c) that
writes the XDR reply by hand: these tests decode every field of its pages
and errors, and check that the two procedures agree with each other and with
GETATTR/LOOKUP.
"""
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(__file__))
import rpc3  # noqa: E402
from rpc3 import RpcConn  # noqa: E402


def root_fh(conn):
    st, res = conn.mnt("/")
    assert st == 0
    return res[0]


def make_dir(c, n):
    """A bucket with @p n files of names of every length class (1..200 bytes)."""
    st, bfh = c.mkdir(root_fh(c), "t" + uuid.uuid4().hex[:12])
    assert st == 0
    names = set()
    for i in range(n):
        name = f"{i:03d}" + "x" * (i * 7 % 198)
        assert c.create(bfh, name)[0] == 0
        names.add(name)
    return bfh, names


def walk_plus(c, dfh, dircount, maxcount):
    out, cookie, verf, pages = [], 0, b"\0" * 8, 0
    while True:
        st, (ents, eof, verf, dattr) = c.readdirplus(dfh, cookie, verf, dircount, maxcount)
        assert st == 0
        assert dattr is not None and dattr["type"] == 2  # NF3DIR
        pages += 1
        out += ents
        if eof:
            return out, pages, verf
        assert ents, "a page that is not the last holds at least one entry"
        cookie = ents[-1]["cookie"]


def test_readdirplus_pages_attributes_and_handles(nfsd):
    c = RpcConn(nfsd.nfs_port)
    bfh, names = make_dir(c, 150)
    st, battr = c.getattr(bfh)
    assert st == 0
    ents, pages, verf = walk_plus(c, bfh, dircount=1024, maxcount=4096)
    assert pages > 5, "dircount/maxcount bound the page"
    assert [e["name"] for e in ents[:2]] == [".", ".."]
    assert sorted(e["name"] for e in ents[2:]) == sorted(names)
    cookies = [e["cookie"] for e in ents]
    assert len(set(cookies)) == len(cookies), "cookies are unique"
    # "." is the directory itself, with its handle; ".." has neither.
    dot, dotdot = ents[0], ents[1]
    assert dot["fileid"] == battr["fileid"] and dot["attr"]["fileid"] == battr["fileid"]
    assert dot["fh"] is not None and c.getattr(dot["fh"])[1]["fileid"] == battr["fileid"]
    assert dotdot["attr"] is None and dotdot["fh"] is None
    for e in ents[2:]:
        a = e["attr"]
        assert a is not None and e["fh"] is not None
        assert a["type"] == 1 and a["fileid"] == e["fileid"] and a["mode"] & 0o777 == 0o644
        assert a["fsid"] == battr["fsid"] and a["nlink"] == 1 and a["size"] == 0
    # Handles and attributes agree with LOOKUP and GETATTR (a sample, every length class).
    for e in ents[2::7]:
        st, lfh = c.lookup(bfh, e["name"])
        assert st == 0 and lfh == e["fh"]
        st, ga = c.getattr(e["fh"])
        assert st == 0 and ga == e["attr"]
    # READDIR lists the same entries with the same cookies and verifier.
    plain, cookie, rverf = [], 0, b"\0" * 8
    while True:
        st, (rents, eof, rverf) = c.readdir(bfh, cookie, rverf, count=2000)
        assert st == 0
        plain += rents
        if eof:
            break
        cookie = rents[-1][2]
    assert [(e["fileid"], e["name"], e["cookie"]) for e in ents] == plain
    assert rverf == verf
    # A page resumed from any cookie continues exactly after it.
    mid = ents[77]["cookie"]
    st, (rest, _, _, _) = c.readdirplus(bfh, mid, verf, 1 << 16, 1 << 16)
    assert st == 0 and [e["name"] for e in rest] == [e["name"] for e in ents[78:]][:len(rest)]
    c.close()


def test_readdirplus_errors_carry_directory_attributes(nfsd):
    c = RpcConn(nfsd.nfs_port)
    bfh, _ = make_dir(c, 3)
    st, battr = c.getattr(bfh)
    st, (ents, _, verf, _) = c.readdirplus(bfh)
    cookie = ents[2]["cookie"]
    # A wrong verifier with a nonzero cookie; a zero or the right verifier is
    # accepted; a cookie the server never gave out is refused.
    st, dattr = c.readdirplus(bfh, cookie, b"\x01" * 8)
    assert st == rpc3.NFS3ERR_BAD_COOKIE and dattr["fileid"] == battr["fileid"]
    assert c.readdir(bfh, cookie, b"\x01" * 8)[0] == rpc3.NFS3ERR_BAD_COOKIE
    assert c.readdirplus(bfh, cookie, b"\0" * 8)[0] == 0
    st, (rest, eof, _, _) = c.readdirplus(bfh, cookie, verf)
    assert st == 0 and eof and [e["name"] for e in rest] == [e["name"] for e in ents[3:]]
    # Every cookie names a position: one no entry has continues after it.
    st, (after3, _, _, _) = c.readdirplus(bfh, 3, verf)
    assert st == 0 and [e["name"] for e in after3] == [e["name"] for e in ents[2:]]
    # Too small for the fixed part of the reply, a zero dircount, or for one entry.
    for dircount, maxcount in ((4096, 40), (0, 8192), (4096, 120), (8, 8192)):
        st, dattr = c.readdirplus(bfh, 0, b"\0" * 8, dircount, maxcount)
        assert st == rpc3.NFS3ERR_TOOSMALL, (dircount, maxcount)
        assert dattr is not None and dattr["fileid"] == battr["fileid"]
    st, u = c.nfs(rpc3.READDIR, rpc3.Packer().opaque(bfh).u64(0).fopaque(b"\0" * 8).u32(100)
                  .bytes())
    assert st == rpc3.NFS3ERR_TOOSMALL and u.post_op_attr()["fileid"] == battr["fileid"]
    # A page exactly big enough for "." alone.
    st, (ents, eof, _, _) = c.readdirplus(bfh, 0, b"\0" * 8, 4096, 108 + 4 + 24 + 4 + 84 + 4 + 36)
    assert st == 0 and [e["name"] for e in ents] == ["."] and not eof
    # A file is not a directory; a forged handle is refused without attributes.
    st, ffh = c.lookup(bfh, "000")
    st, fattr = c.readdirplus(ffh)
    assert st == rpc3.NFS3ERR_NOTDIR and fattr["type"] == 1
    assert c.readdir(ffh)[0] == rpc3.NFS3ERR_NOTDIR
    bad = bytearray(bfh)
    bad[-1] ^= 1
    st, dattr = c.readdirplus(bytes(bad))
    assert st in (rpc3.NFS3ERR_STALE, rpc3.NFS3ERR_BADHANDLE) and dattr is None
    c.close()


def test_readdirplus_large_page_of_long_names(nfsd):
    """One call returns the whole directory when maxcount allows (1 MiB cap)."""
    c = RpcConn(nfsd.nfs_port)
    bfh, names = make_dir(c, 200)
    st, (ents, eof, _, _) = c.readdirplus(bfh, 0, b"\0" * 8, 1 << 20, 1 << 24)
    assert st == 0 and eof and sorted(e["name"] for e in ents[2:]) == sorted(names)
    c.close()


TOP_BIT = 1 << 63


def walk_plain(c, dfh, cookie=0, count=1024):
    out, verf = [], b"\0" * 8
    while True:
        st, (ents, eof, verf) = c.readdir(dfh, cookie, verf, count=count)
        assert st == 0
        out += ents
        if eof:
            return out, verf
        cookie = ents[-1][2]


def test_cookies_below_2_63_and_resume(nfsd):
    """A Linux client uses cookies as (signed) directory offsets: a cookie with
    the top bit set makes telldir/seekdir fail. Every cookie of both
    procedures is below 2^63, and a listing resumed from any of them
    continues right after that entry."""
    c = RpcConn(nfsd.nfs_port)
    bfh, names = make_dir(c, 120)
    plain, verf = walk_plain(c, bfh)
    plus, _, _ = walk_plus(c, bfh, dircount=1024, maxcount=4096)
    assert [e[2] for e in plain] == [e["cookie"] for e in plus]
    cookies = [e[2] for e in plain]
    assert all(0 < k < TOP_BIT for k in cookies), [hex(k) for k in cookies if k >= TOP_BIT]
    assert cookies[:2] == [1, 2]
    assert len(set(cookies)) == len(cookies)
    assert sorted(e[1] for e in plain[2:]) == sorted(names)
    for i in range(0, len(plain), 9):
        rest, _ = walk_plain(c, bfh, cookie=plain[i][2])
        assert [e[1] for e in rest] == [e[1] for e in plain[i + 1:]], i
        st, (prest, _, _, _) = c.readdirplus(bfh, plain[i][2], verf, 1 << 16, 1 << 20)
        assert st == 0 and [e["name"] for e in prest] == [e[1] for e in plain[i + 1:]], i
    c.close()


def test_old_top_bit_cookies_still_resume(nfsd):
    """A client that listed a directory before the upgrade holds cookies with
    the top bit set (the stored value: 2^63 + wire cookie - 3). The server
    takes them as before: the listing continues after the same entry."""
    c = RpcConn(nfsd.nfs_port)
    bfh, _ = make_dir(c, 40)
    plain, verf = walk_plain(c, bfh)
    for i in range(2, len(plain), 5):
        wire = plain[i][2]
        old = wire - 3 + TOP_BIT
        rest, _ = walk_plain(c, bfh, cookie=old)
        assert [e[1] for e in rest] == [e[1] for e in plain[i + 1:]], i
        assert all(e[2] < TOP_BIT for e in rest)
        st, (prest, _, _, _) = c.readdirplus(bfh, old, verf, 1 << 16, 1 << 20)
        assert st == 0 and [e["name"] for e in prest] == [e[1] for e in plain[i + 1:]]
    # The last old cookie and the largest one: the end of the directory.
    for old in (plain[-1][2] - 3 + TOP_BIT, (1 << 64) - 1):
        st, (ents, eof, _) = c.readdir(bfh, old, verf)
        assert st == 0 and eof and ents == []
    c.close()
