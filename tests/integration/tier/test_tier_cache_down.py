# SPDX-License-Identifier: Apache-2.0
"""A cache bucket whose remote is down, for a directory never imported
(docs/tiering.md § Cache mode, "If the remote cannot be listed"): the remote
is a second s3nfsd of the test's own, SIGKILLed by PID and started again on
the same port and data folder.

- S3 ListObjectsV2 of a prefix never imported, HEAD and GET of a name in it
  answer 503 ServiceUnavailable, the error's message naming the prefix that
  could not be imported; NFS LOOKUP and READDIR in that directory answer
  NFS3ERR_JUKEBOX;
- once the remote has failed for tier_recall_fail_ms (here 4 s), the very
  rule of a recall: NFS answers NFS3ERR_IO (a client would retry JUKEBOX
  forever), S3 500 with a message that says so;
- names imported before are served all along (S3 listing, HEAD, GET; NFS
  LOOKUP, READDIR, READ);
- the remote back: the directory imports, lists and reads (S3 and NFS)."""
import os
import sys
import time
import uuid

import botocore.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import Admin, Nfs  # noqa: E402
from tierutil import add_remote, wait_for  # noqa: E402

FAIL_MS = 4000
FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "data_file_size=1GiB", "--set", "tier_recall_wait_ms=2000",
        "--set", f"tier_recall_fail_ms={FAIL_MS}"]
JUKEBOX, NFS3ERR_IO = 10008, 5


def body_of(key):
    return (key.encode() * 400)[:3000]


def s3_err(fn):
    """(status, code, message) of the error @fn raises (a HEAD has no message)."""
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        r = e.response
        return (r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"],
                r["Error"].get("Message", ""))
    raise AssertionError("no error")


def lookup_path(n, root, b, path):
    st, fh = n.lookup(root, b)
    assert st == 0, st
    for part in path.split("/"):
        st, fh = n.lookup(fh, part)
        if st != 0:
            return st, None
    return 0, fh


def test_never_imported_prefix_with_the_remote_down(daemon_factory, own_s3nfsd):
    rem = own_s3nfsd
    rs3 = rem.s3
    keys = ["ds/seen/a", "ds/seen/b", "ds/never/x", "ds/never/sub/y"]
    for k in keys:
        rs3.put_object(Bucket=rem.bucket, Key=k, Body=body_of(k))
    dm = daemon_factory(extra_args=FAST).start()
    adm = Admin(dm)
    r = add_remote(adm, rem.endpoint, rem.access_key, rem.secret_key, rem.bucket, "ds/")
    b = "cm" + uuid.uuid4().hex[:8]
    s3 = dm.boto3()  # one attempt per call: the error itself is seen
    s3.create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 3600})
    adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": 1})
    # the root and seen/ imported, seen/a read (local); never/ is only a name of the root
    got = s3.list_objects_v2(Bucket=b, Prefix="seen/", Delimiter="/")
    assert [o["Key"] for o in got["Contents"]] == ["seen/a", "seen/b"]
    assert s3.get_object(Bucket=b, Key="seen/a")["Body"].read() == body_of("ds/seen/a")
    with Nfs(dm) as n:
        st, root = n.mount("/")
        assert st == 0
        st, fh_a = lookup_path(n, root, b, "seen/a")
        assert st == 0, st
        st, fh_never = lookup_path(n, root, b, "never")
        assert st == 0, st

    rem.daemon.kill()
    time.sleep(1.2)  # past the TTL: seen/ is revalidated (and fails) at its next use
    t_down = time.monotonic()
    # S3: 503 naming the prefix that could not be imported
    st, code, msg = s3_err(lambda: s3.list_objects_v2(Bucket=b, Prefix="never/",
                                                      Delimiter="/"))
    assert (st, code) == (503, "ServiceUnavailable"), (st, code, msg)
    assert "unreachable" in msg and "importing prefix 'never/'" in msg, msg
    st, code, msg = s3_err(lambda: s3.get_object(Bucket=b, Key="never/sub/y"))
    assert (st, code) == (503, "ServiceUnavailable"), (st, code, msg)
    assert "importing prefix 'never/'" in msg, msg
    assert s3_err(lambda: s3.head_object(Bucket=b, Key="never/x"))[0] == 503
    with Nfs(dm) as n:
        assert n.lookup(fh_never, "x")[0] == JUKEBOX
        assert n.readdir(fh_never)[0] == JUKEBOX
        assert n.readdirplus(fh_never)[0] == JUKEBOX
        # imported before: served
        assert n.read_all(fh_a) == body_of("ds/seen/a")
        st, fh_seen = lookup_path(n, root, b, "seen")
        assert st == 0, st
        st, ents = n.readdir(fh_seen)
        assert st == 0 and {e[1] for e in ents[0]} >= {"a", "b"}, (st, ents)
        assert n.lookup(fh_seen, "b")[0] == 0
        assert time.monotonic() - t_down < FAIL_MS / 1000, "too slow to see JUKEBOX first"
        # then, once the remote has failed for tier_recall_fail_ms: EIO, not JUKEBOX forever
        sts = []

        def eio():
            s = n.lookup(fh_never, "x")[0]
            sts.append(s)
            return s == NFS3ERR_IO
        wait_for(eio, timeout=FAIL_MS / 1000 + 20, step=0.5, what="NFS3ERR_IO")
        assert set(sts) <= {JUKEBOX, NFS3ERR_IO}, sts
        assert time.monotonic() - t_down >= FAIL_MS / 1000 - 0.5
        assert n.readdir(fh_never)[0] == NFS3ERR_IO
        assert n.read_all(fh_a) == body_of("ds/seen/a")
    st, code, msg = s3_err(lambda: s3.list_objects_v2(Bucket=b, Prefix="never/",
                                                      Delimiter="/"))
    assert (st, code) == (500, "InternalError"), (st, code, msg)
    assert "unreachable for tier_recall_fail_ms" in msg and "'never/'" in msg, msg
    # imported names keep being served by S3 too
    got = s3.list_objects_v2(Bucket=b, Prefix="seen/", Delimiter="/")
    assert [o["Key"] for o in got["Contents"]] == ["seen/a", "seen/b"]
    assert s3.head_object(Bucket=b, Key="seen/b")["ContentLength"] == 3000
    assert s3.get_object(Bucket=b, Key="seen/a")["Body"].read() == body_of("ds/seen/a")
    assert "never/" in dm.tail(400)  # the daemon's WARN names the listing

    # the remote back: the import works (S3 and NFS)
    rem.daemon.start()

    def listed():
        try:
            return s3.list_objects_v2(Bucket=b, Prefix="never/", Delimiter="/")
        except botocore.exceptions.ClientError:
            return None
    got = wait_for(listed, timeout=60, what="the remote back")
    assert [o["Key"] for o in got["Contents"]] == ["never/x"]
    assert [p["Prefix"] for p in got["CommonPrefixes"]] == ["never/sub/"]
    assert s3.get_object(Bucket=b, Key="never/sub/y")["Body"].read() == body_of("ds/never/sub/y")
    with Nfs(dm) as n:
        st, ents = n.readdir(fh_never)
        assert st == 0 and {e[1] for e in ents[0]} >= {"x", "sub"}, (st, ents)
        st, fh_x = n.lookup(fh_never, "x")
        assert st == 0, st
        assert n.read_all(fh_x) == body_of("ds/never/x")
