# SPDX-License-Identifier: Apache-2.0
"""Names with a NUL byte, sent with the raw RPC client (rpc3.py) so the NUL
really reaches the server (kernel clients never send one).

A C string ends at the first NUL: a server that decodes filename3 with
xdr_string and then takes strlen() would CREATE "nul" for "nul\\0tail",
LOOKUP or REMOVE the existing "nul", and so on. Every procedure that takes a
name refuses it with NFS3ERR_INVAL, and so does SYMLINK for a target with a
NUL; nothing is created, found or removed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpc3  # noqa: E402
from rpc3 import Packer, RpcConn, sattr3  # noqa: E402

INVAL = rpc3.NFS3ERR_INVAL
NF3FIFO = 7


def status(c, proc, args):
    st, _ = c.nfs(proc, args)
    return st


def dirop(fh, name):
    return Packer().opaque(fh).string(name)


def test_nul_in_names_is_refused(nfsd):
    c = RpcConn(nfsd.nfs_port)
    _, bfh = c.new_bucket()
    st, ffh = c.create(bfh, "nul")
    assert st == 0
    st, dfh = c.mkdir(bfh, "dnul")
    assert st == 0

    def names():
        st, (ents, eof, _) = c.readdir(bfh, count=65536)
        assert st == 0 and eof
        return sorted(e[1] for e in ents)

    before = names()
    assert before == [".", "..", "dnul", "nul"]
    # Each procedure, its name holding a NUL after an existing or a new prefix.
    assert status(c, rpc3.LOOKUP, dirop(bfh, b"nul\0tail").bytes()) == INVAL
    assert status(c, rpc3.CREATE, dirop(bfh, b"new\0tail").u32(0).raw(sattr3(0o644))
                  .bytes()) == INVAL
    assert status(c, rpc3.CREATE, dirop(bfh, b"nul\0tail").u32(1).raw(sattr3(0o644))
                  .bytes()) == INVAL  # GUARDED: an existing "nul" would answer EXIST
    assert status(c, rpc3.MKDIR, dirop(bfh, b"newd\0x").raw(sattr3(0o755)).bytes()) == INVAL
    assert status(c, rpc3.SYMLINK, dirop(bfh, b"sym\0x").raw(sattr3()).string("target")
                  .bytes()) == INVAL
    assert status(c, rpc3.MKNOD, dirop(bfh, b"fifo\0x").u32(NF3FIFO).raw(sattr3(0o644))
                  .bytes()) == INVAL
    assert status(c, rpc3.REMOVE, dirop(bfh, b"nul\0tail").bytes()) == INVAL
    assert status(c, rpc3.RMDIR, dirop(bfh, b"dnul\0tail").bytes()) == INVAL
    assert status(c, rpc3.RENAME, dirop(bfh, b"nul\0tail").raw(dirop(bfh, "moved").bytes())
                  .bytes()) == INVAL
    assert status(c, rpc3.RENAME, dirop(bfh, "nul").raw(dirop(bfh, b"moved\0tail").bytes())
                  .bytes()) == INVAL
    assert status(c, rpc3.LINK, Packer().opaque(ffh).raw(dirop(bfh, b"lnk\0tail").bytes())
                  .bytes()) == INVAL
    # SYMLINK's target is cut the same way: refused too.
    assert status(c, rpc3.SYMLINK, dirop(bfh, "sym").raw(sattr3()).string(b"tar\0get")
                  .bytes()) == INVAL
    # The other bad names, as docs/nfs.md lists them.
    for name, create_st, lookup_st in ((b"", INVAL, rpc3.NFS3ERR_NOENT),
                                       (b"a/b", INVAL, rpc3.NFS3ERR_NOENT),
                                       (b".", INVAL, 0), (b"..", INVAL, 0),
                                       (b"x" * 256, rpc3.NFS3ERR_NAMETOOLONG,
                                        rpc3.NFS3ERR_NAMETOOLONG)):
        assert status(c, rpc3.CREATE, dirop(bfh, name).u32(0).raw(sattr3(0o644))
                      .bytes()) == create_st, name
        assert status(c, rpc3.LOOKUP, dirop(bfh, name).bytes()) == lookup_st, name
    # Nothing was created, found, renamed or removed.
    assert names() == before
    assert c.lookup(bfh, "nul")[0] == 0 and c.lookup(bfh, "dnul")[0] == 0
    # The same names without the NUL work, on the same connection.
    assert c.create(bfh, "new")[0] == 0
    assert status(c, rpc3.SYMLINK, dirop(bfh, "sym").raw(sattr3()).string("target")
                  .bytes()) == 0
    assert status(c, rpc3.REMOVE, dirop(bfh, "nul").bytes()) == 0
    assert names() == [".", "..", "dnul", "new", "sym"]
    c.close()
    assert "holds a NUL byte: NFS3ERR_INVAL" in open(nfsd.log_path).read()
