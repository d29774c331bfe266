# SPDX-License-Identifier: Apache-2.0
"""Cache mode's import times survive a restart (docs/tiering.md § Cache mode,
"Revalidation") against the session's real Ceph RGW (`rgw`): directories
imported within ttl_s before a restart are not listed on the remote again
after it (s3nfs_cache_imports_total stays 0, a remote object added meanwhile
shows only after the TTL or a cache-mode change); a cache-mode change makes
every directory due again."""
import os
import re
import sys
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
from tenutil import Admin  # noqa: E402
from tierutil import add_remote, new_bucket  # noqa: E402

FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "data_file_size=1GiB"]


def metric(d, name):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def keys(s3, b, prefix):
    return sorted(o["Key"] for o in
                  s3.list_objects_v2(Bucket=b, Prefix=prefix, Delimiter="/").get("Contents", []))


def test_import_times_survive_a_restart(daemon_factory, rgw):
    dm = daemon_factory(extra_args=FAST).start()
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "cmr-")
    for k in ("ds/r/a.txt", "ds/r/b.txt", "ds/top.txt"):
        rs3.put_object(Bucket=rb, Key=k, Body=b"x")
    adm = Admin(dm)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, "ds/")
    b = "cmr" + uuid.uuid4().hex[:8]
    dm.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"]})
    adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": 3600, "read_only": True})
    s3 = dm.boto3()
    assert keys(s3, b, "r/") == ["r/a.txt", "r/b.txt"]
    assert metric(dm, "s3nfs_cache_imports_total") >= 2  # the root and r/

    rs3.put_object(Bucket=rb, Key="ds/r/new.txt", Body=b"n")
    dm.restart()
    s3 = dm.boto3()
    # within ttl_s: served as imported, the remote not listed
    assert keys(s3, b, "r/") == ["r/a.txt", "r/b.txt"]
    assert s3.head_object(Bucket=b, Key="r/a.txt")["ContentLength"] == 1
    assert keys(s3, b, "") == ["top.txt"]
    assert metric(dm, "s3nfs_cache_imports_total") == 0
    assert s3.get_object(Bucket=b, Key="r/b.txt")["Body"].read() == b"x"

    # a change of the cache mode makes every directory due (also across a restart)
    adm = Admin(dm)
    adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": 3600, "read_only": True})
    dm.restart()
    s3 = dm.boto3()
    assert keys(s3, b, "r/") == ["r/a.txt", "r/b.txt", "r/new.txt"]
    assert metric(dm, "s3nfs_cache_imports_total") >= 2
