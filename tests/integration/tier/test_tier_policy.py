# SPDX-License-Identifier: Apache-2.0
"""Tier policies on directories, against the real Ceph RGW of the session
(`rgw`):

- a directory's upload delay overrides the bucket's (its files go up first);
- a directory marked keep_local is never evicted, whatever the bucket's
  eviction age; the nearest directory policy on a file's path wins;
- renaming a file into another directory changes the policy that applies;
- the admin API (GET/PUT/DELETE ?dir=PATH, the bucket's GET listing them) and
  `s3nfsctl tier ... --dir`, and the bucket's watermark and pin flags."""
import json
import os
import re
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from s3nfsd_harness import CTL  # noqa: E402
from tenutil import Admin, Nfs  # noqa: E402
from tierutil import add_remote  # noqa: E402
from test_tier_evict import (FAST, MiB, d, get, new_remote_bucket, state,  # noqa: E402,F401
                             wait_for)


def tiered(d, rgw, **policy):
    adm = Admin(d)
    rb = new_remote_bucket(rgw.boto3())
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb)
    b = "dp" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    return adm, r, rb, b


def lookup_dir(n, b, path):
    st, fh = n.mount("/")
    assert st == 0
    for part in [b] + [p for p in path.split("/") if p]:
        st, fh = n.lookup(fh, part)
        assert st == 0, (path, st)
    return fh


def test_dir_policies_upload_keep_local_and_rename(d, rgw):
    adm, r, rb, b = tiered(d, rgw)
    s3 = d.boto3()
    data = {k: os.urandom(2 * MiB + 7) for k in
            ("fast/a.bin", "fast/keep/k.bin", "fast/keep/deeper/k2.bin", "slow/s.bin",
             "slow/t.bin")}
    for k, v in data.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    # the bucket: an hour before upload, eviction one second after the last read
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 3600,
                                             "evict_after_s": 1})
    base = f"/tenants/1/buckets/{b}/tier"
    got = adm.put(base + "?dir=fast", {"upload_after_s": 0})
    assert got["upload_after_s"] == 0 and got["dir"] == "fast" and got["dir_ino"] > 0
    eff = got["effective"]
    assert {k: eff[k] for k in ("upload_after_s", "evict_after_s", "keep_local",
                                "evict_priority", "read_only", "preset")} == \
        {"upload_after_s": 0, "evict_after_s": 1, "keep_local": False,
         "evict_priority": "normal", "read_only": False, "preset": None}
    # chunk_size 0: the daemon's tier_recall_chunk_size
    assert eff["recall"] == {"read_ahead": 0, "streams": 0, "chunk_size": 0,
                             "whole_file": True}
    got = adm.put(base + "?dir=fast/keep", {"upload_after_s": 0, "keep_local": True,
                                            "evict_priority": "low"})
    assert got["keep_local"] is True and got["evict_priority"] == "low"
    assert "evict_after_s" not in got  # not set here: the bucket's applies
    # a directory's short delay: its files go up (and, by the bucket's age, are evicted)
    wait_for(lambda: state(d, b, "fast/a.bin") == "evicted", what="fast/a.bin evicted")
    # the nearest policy wins: keep_local below fast/keep, at any depth
    wait_for(lambda: state(d, b, "fast/keep/k.bin") == "uploaded", what="k uploaded")
    wait_for(lambda: state(d, b, "fast/keep/deeper/k2.bin") == "uploaded", what="k2 uploaded")
    time.sleep(3)  # several passes, well past evict_after_s
    assert state(d, b, "fast/keep/k.bin") == "uploaded"
    assert state(d, b, "fast/keep/deeper/k2.bin") == "uploaded"
    # the bucket's delay for the rest: not copied yet
    assert state(d, b, "slow/s.bin") == "local"
    assert rgw.boto3().list_objects_v2(Bucket=rb, Prefix="p/slow/").get("KeyCount") == 0
    up = adm.get(base)["uploads"]
    assert up["pending_files"] == 2
    # the bucket's GET lists its directories' policies
    dirs = adm.get(base)["directories"]
    assert sorted(x.get("upload_after_s") for x in dirs) == [0, 0]
    assert adm.get(base + "?dir=fast/keep")["effective"]["keep_local"] is True
    st, js = adm.call("GET", base + "?dir=slow")
    assert st == 404, js
    # renames between directories change the policy that applies
    with Nfs(d) as n:
        slow, fast = lookup_dir(n, b, "slow"), lookup_dir(n, b, "fast")
        keep = lookup_dir(n, b, "fast/keep")
        assert n.rename(slow, "s.bin", fast, "s.bin") == 0  # into a 0 s delay
        assert n.rename(keep, "k.bin", fast, "k.bin") == 0  # out of keep_local
    wait_for(lambda: state(d, b, "fast/s.bin") == "evicted", what="renamed s evicted")
    wait_for(lambda: state(d, b, "fast/k.bin") == "evicted", what="renamed k evicted")
    assert state(d, b, "slow/t.bin") == "local"
    assert get(d, b, "fast/s.bin") == data["slow/s.bin"]
    assert get(d, b, "fast/k.bin") == data["fast/keep/k.bin"]
    # a policy removed: the bucket's applies again (keep_local gone: evicted)
    assert adm.call("DELETE", base + "?dir=fast/keep")[0] == 204
    wait_for(lambda: state(d, b, "fast/keep/deeper/k2.bin") == "evicted", what="k2 evicted")
    assert len(adm.get(base)["directories"]) == 1
    # refusals
    st, js = adm.call("PUT", base + "?dir=fast", {"upload_after_s": -1})
    assert st == 400, js
    st, js = adm.call("PUT", base + "?dir=fast", {"evict_priority": "urgent"})
    assert st == 400, js
    st, js = adm.call("PUT", base + "?dir=fast", {"remote": r["id"]})
    assert st == 400, js
    st, js = adm.call("PUT", base + "?dir=nope", {"upload_after_s": 1})
    assert st == 404, js
    st, js = adm.call("PUT", base + "?dir=fast/a.bin", {"upload_after_s": 1})
    assert st == 400, js
    # the bucket's policy removed: its directories' policies go with it
    assert adm.call("DELETE", base)[0] == 204
    adm.put(base, {"remote": r["id"], "upload_after_s": 3600})
    assert adm.get(base)["directories"] == []


def test_cli_dir_watermark_and_pins(d, rgw):
    adm, r, rb, b = tiered(d, rgw)
    s3 = d.boto3()
    s3.put_object(Bucket=b, Key="ckpt/x.bin", Body=b"x" * 1000)
    env = dict(os.environ, S3NFS_ADMIN=d.admin_endpoint, S3NFS_ADMIN_TOKEN=d.admin_token)

    def ctl(*args, ok=True):
        p = subprocess.run([CTL] + list(args), env=env, text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if ok:
            assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p

    pol = json.loads(ctl("--json", "tier", "set", "1", b, "--remote", str(r["id"]),
                         "--upload-after", "3600", "--evict-watermark", "95:90.5",
                         "--pin-prefixes", "keep/,models/").stdout)
    assert pol["evict_watermark"] == {"high": 95.0, "low": 90.5}
    assert pol["pin_prefixes"] == ["keep/", "models/"]
    dp = json.loads(ctl("--json", "tier", "set", "1", b, "--dir", "ckpt", "--upload-after", "0",
                        "--keep-local", "--evict-priority", "high").stdout)
    assert dp["upload_after_s"] == 0 and dp["keep_local"] is True
    assert dp["evict_priority"] == "high"
    wait_for(lambda: state(d, b, "ckpt/x.bin") == "uploaded", what="ckpt uploaded")
    assert "keep_local" in ctl("tier", "get", "1", b, "--dir", "ckpt").stdout
    bad = ctl("tier", "set", "1", b, "--dir", "ckpt", "--remote", "1", ok=False)
    assert bad.returncode == 2 and "bucket's" in bad.stderr
    bad = ctl("tier", "set", "1", b, "--remote", str(r["id"]), "--keep-local", ok=False)
    assert bad.returncode == 2
    ctl("tier", "delete", "1", b, "--dir", "ckpt")
    assert ctl("tier", "get", "1", b, "--dir", "ckpt", ok=False).returncode != 0
    # presets and knobs, on a directory and on the bucket
    dp = json.loads(ctl("--json", "tier", "set", "1", b, "--dir", "ckpt", "--preset",
                        "DATASET_RO", "--streams", "3", "--chunk-size", "4M",
                        "--no-whole-file", "--read-ahead", "1M", "--dirty-bound", "1G").stdout)
    assert dp["preset"] == "DATASET_RO" and dp["dirty_bound"] == 1 << 30
    assert dp["recall"] == {"streams": 3, "chunk_size": 4 << 20, "whole_file": False,
                            "read_ahead": 1 << 20}
    assert dp["effective"]["read_only"] is True
    pol = json.loads(ctl("--json", "tier", "set", "1", b, "--remote", str(r["id"]), "--preset",
                         "MODEL_CHECKPOINT_RO", "--writable", "--evict-priority", "high").stdout)
    assert pol["preset"] == "MODEL_CHECKPOINT_RO" and pol["read_only"] is False
    assert pol["effective"]["evict_priority"] == "high"
    s3.put_object(Bucket=b, Key="top", Body=b"ok")  # --writable over the preset's read-only
    # the storage class lifecycle Transitions name: set, shown by tier get, checked by the API
    pol = json.loads(ctl("--json", "tier", "set", "1", b, "--remote", str(r["id"]),
                         "--upload-after", "3600", "--storage-class", "GLACIER_IR").stdout)
    assert pol["storage_class"] == "GLACIER_IR"
    out = ctl("tier", "get", "1", b).stdout
    assert re.search(r"^storage_class +GLACIER_IR$", out, re.M), out
    bad = ctl("tier", "set", "1", b, "--remote", str(r["id"]), "--storage-class", "STANDARD",
              ok=False)
    assert bad.returncode == 1 and "storage_class" in bad.stderr, bad.stderr
    assert adm.get(f"/tenants/1/buckets/{b}/tier")["storage_class"] == "GLACIER_IR"
    bad = ctl("tier", "set", "1", b, "--dir", "ckpt", "--storage-class", "GLACIER", ok=False)
    assert bad.returncode == 2 and "bucket's" in bad.stderr
    pol = json.loads(ctl("--json", "tier", "set", "1", b, "--remote", str(r["id"])).stdout)
    assert pol["storage_class"] == "STANDARD_IA"  # a policy set without it: the default


ROFS = 30


def s3_err(fn):
    import botocore.exceptions
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        r = e.response
        return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]
    raise AssertionError("no error")


def test_presets_read_only_and_switch(d, rgw):
    adm, r, rb, b = tiered(d, rgw)
    s3 = d.boto3()
    for k in ("weights/w.bin", "weights/sub/x.bin", "scratch/s.bin", "top.bin"):
        s3.put_object(Bucket=b, Key=k, Body=b"v1")
    base = f"/tenants/1/buckets/{b}/tier"
    # a bucket preset: its knobs show, the policy takes its write-back delay
    pol = adm.put(base, {"remote": r["id"], "preset": "MODEL_CHECKPOINT_RW"})
    assert pol["preset"] == "MODEL_CHECKPOINT_RW" and pol["upload_after_s"] == 0
    eff = pol["effective"]
    # a model load recalls as NONE: all streams, the daemon's chunks, the whole file
    assert eff["recall"] == {"read_ahead": 64 << 20, "streams": 0, "chunk_size": 0,
                             "whole_file": True}
    assert eff["evict_priority"] == "high" and eff["read_only"] is False
    assert eff["dirty_bound"] == 64 << 30
    # every knob can be overridden at the same level
    pol = adm.put(base, {"remote": r["id"], "preset": "MODEL_CHECKPOINT_RW",
                         "upload_after_s": 30, "recall": {"streams": 4}, "dirty_bound": 1000})
    assert pol["upload_after_s"] == 30 and pol["recall"] == {"streams": 4}
    assert pol["effective"]["recall"]["streams"] == 4
    assert pol["effective"]["recall"]["chunk_size"] == 0
    # a directory with DATASET_RO: read-only below it, by S3 and NFS
    dp = adm.put(base + "?dir=weights", {"preset": "DATASET_RO"})
    assert dp["preset"] == "DATASET_RO" and dp["effective"]["read_only"] is True
    assert dp["effective"]["dir_prefetch"] is True
    t0 = time.time()
    assert s3_err(lambda: s3.put_object(Bucket=b, Key="weights/w.bin", Body=b"v2")) == \
        (403, "AccessDenied")
    assert time.time() - t0 < 1.0  # applies at once
    assert s3_err(lambda: s3.put_object(Bucket=b, Key="weights/sub/new", Body=b"n")) == \
        (403, "AccessDenied")
    assert s3_err(lambda: s3.delete_object(Bucket=b, Key="weights/w.bin")) == \
        (403, "AccessDenied")
    assert s3_err(lambda: s3.copy_object(Bucket=b, Key="weights/c",
                                         CopySource={"Bucket": b, "Key": "top.bin"})) == \
        (403, "AccessDenied")
    res = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "weights/sub/x.bin"},
                                                          {"Key": "scratch/s.bin"}]})
    assert [e["Key"] for e in res.get("Errors", [])] == ["weights/sub/x.bin"]
    assert [e["Key"] for e in res.get("Deleted", [])] == ["scratch/s.bin"]
    # reads go on; elsewhere writes go on
    assert get(d, b, "weights/w.bin") == b"v1"
    s3.put_object(Bucket=b, Key="top.bin", Body=b"v2")
    with Nfs(d) as n:
        w = lookup_dir(n, b, "weights")
        st, fh = n.lookup(w, "w.bin")
        assert st == 0
        assert n.write(fh, 0, b"xx", 2)[0] == ROFS
        assert n.create(w, "new")[0] == ROFS
        assert n.mkdir(w, "newdir")[0] == ROFS
        assert n.remove(w, "w.bin") == ROFS
        top = lookup_dir(n, b, "")
        assert n.rename(w, "w.bin", top, "moved") == ROFS
        assert n.read(fh, 0, 10)[0] == 0
        # the nearest policy wins: a writable directory inside the read-only one
        st, sub = n.lookup(w, "sub")
        assert st == 0
    adm.put(base + "?dir=weights/sub", {"preset": "DATASET_RW"})
    s3.put_object(Bucket=b, Key="weights/sub/ok", Body=b"k")
    # switching the preset applies within a second, without a restart
    adm.put(base + "?dir=weights", {"preset": "MODEL_CHECKPOINT_RW"})
    t0 = time.time()
    s3.put_object(Bucket=b, Key="weights/w.bin", Body=b"v3")
    assert time.time() - t0 < 1.0
    with Nfs(d) as n:
        w = lookup_dir(n, b, "weights")
        st, fh = n.lookup(w, "w.bin")
        assert n.write(fh, 0, b"v4", 2)[0] == 0
    adm.put(base + "?dir=weights", {"preset": "MODEL_CHECKPOINT_RW", "read_only": True})
    assert s3_err(lambda: s3.put_object(Bucket=b, Key="weights/w.bin", Body=b"v5")) == \
        (403, "AccessDenied")
    # the whole bucket read-only, then not
    adm.put(base, {"remote": r["id"], "preset": "DATASET_RO"})
    assert s3_err(lambda: s3.put_object(Bucket=b, Key="top.bin", Body=b"v3")) == \
        (403, "AccessDenied")
    adm.put(base, {"remote": r["id"], "preset": "NONE"})
    s3.put_object(Bucket=b, Key="top.bin", Body=b"v3")
    adm.call("DELETE", base)
    s3.put_object(Bucket=b, Key="weights/w.bin", Body=b"v6")  # no policy: writable
    # refusals
    adm.put(base, {"remote": r["id"]})
    for body in ({"preset": "FAST"}, {"recall": {"chunk_size": 3 << 19}},
                 {"recall": {"streams": 100}}, {"recall": {"bogus": 1}},
                 {"read_only": "yes"}):
        st, js = adm.call("PUT", base + "?dir=weights", body)
        assert st == 400, (body, js)
    st, js = adm.call("PUT", base, {"remote": r["id"], "cache_mode": True})
    assert st == 400 and "/cache" in js["message"], js


def test_recall_settings(d, rgw):
    from test_tier_evict import metric
    adm, r, rb, b = tiered(d, rgw)
    s3 = d.boto3()
    data = {k: os.urandom(20 * MiB + 5) for k in ("part/f.bin", "whole/f.bin")}
    for k, v in data.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    base = f"/tenants/1/buckets/{b}/tier"
    adm.put(base, {"remote": r["id"], "upload_after_s": 0, "evict_after_s": 1})
    dp = adm.put(base + "?dir=part", {"recall": {"whole_file": False, "chunk_size": 1 << 20,
                                                 "read_ahead": 2 << 20, "streams": 2}})
    assert dp["effective"]["recall"] == {"whole_file": False, "chunk_size": 1 << 20,
                                         "read_ahead": 2 << 20, "streams": 2}
    for k in data:
        wait_for(lambda k=k: state(d, b, k) == "evicted", what=f"{k} evicted")
    # whole_file off: a read brings back its chunk and read_ahead bytes after it, no more
    m0 = metric(d, "s3nfs_tier_recalled_bytes_total") or 0
    assert get(d, b, "part/f.bin", "bytes=0-99") == data["part/f.bin"][:100]
    time.sleep(1)
    assert metric(d, "s3nfs_tier_recalled_bytes_total") - m0 == 3 << 20
    assert state(d, b, "part/f.bin") == "evicted"
    # a setting changed between two reads: chunks of another size over what is back
    adm.put(base + "?dir=part", {"recall": {"whole_file": False, "chunk_size": 4 << 20}})
    m0 = metric(d, "s3nfs_tier_recalled_bytes_total")
    assert get(d, b, "part/f.bin", "bytes=100-199") == data["part/f.bin"][100:200]
    assert get(d, b, "part/f.bin", "bytes=3145728-3145827") == \
        data["part/f.bin"][3 << 20:(3 << 20) + 100]
    time.sleep(1)
    assert metric(d, "s3nfs_tier_recalled_bytes_total") - m0 == 1 << 20  # only 3..4 MiB
    # ... and the rest when asked (a whole GET)
    assert get(d, b, "part/f.bin") == data["part/f.bin"]
    # the bucket's default: the whole file on a first read
    m1 = metric(d, "s3nfs_tier_recalled_bytes_total")
    assert get(d, b, "whole/f.bin", "bytes=0-99") == data["whole/f.bin"][:100]
    wait_for(lambda: metric(d, "s3nfs_tier_recalled_bytes_total") - m1 >= len(data["whole/f.bin"]),
             what="whole file recalled")


def test_remote_update(d, rgw):
    adm, r, rb, b = tiered(d, rgw)
    s3 = d.boto3()
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 0})
    rp = f"/remotes/{r['id']}"

    def up(key):
        s3.put_object(Bucket=b, Key=key, Body=key.encode())
        wait_for(lambda: state(d, b, key) == "uploaded", what=f"{key} uploaded")

    up("a")
    # limits: changed, checked again, the secret never answered
    got = adm.patch(rp, {"max_conns": 4, "parallel": 2, "connect_timeout_ms": 5000})
    assert (got["max_conns"], got["parallel"], got["connect_timeout_ms"]) == (4, 2, 5000)
    assert "secret_key" not in got and adm.get(rp)["parallel"] == 2
    up("b")
    # a wrong secret is refused and changes nothing
    st, js = adm.call("PATCH", rp, {"secret_key": "x" * 40})
    assert st == 400 and js["error"] == "RemoteCheckFailed", js
    assert adm.get(rp)["access_key"] == rgw.access_key
    up("c")
    # what it points to cannot change; a new key id needs its secret; limits are positive
    for body in ({"endpoint": "http://127.0.0.1:1"}, {"bucket": "other"}, {"prefix": "q/"},
                 {"access_key": "AKNEW"}, {"parallel": 0}, {"name": "n"}):
        st, js = adm.call("PATCH", rp, body)
        assert st == 400, (body, js)
    # rotation: a second key of the RGW user; the uploader uses it from the next request
    k2, s2 = "AK" + uuid.uuid4().hex[:18].upper(), uuid.uuid4().hex + uuid.uuid4().hex[:8]
    from rgw import USER
    rgw._run(["radosgw-admin", "-c", rgw.conf, "-n", "client.admin", "key", "create",
              f"--uid={USER}", "--key-type=s3", f"--access-key={k2}", f"--secret={s2}"])
    try:
        got = adm.patch(rp, {"access_key": k2, "secret_key": s2})
        assert got["access_key"] == k2
        # the old key goes: uploads go on with the new one
        rgw._run(["radosgw-admin", "-c", rgw.conf, "-n", "client.admin", "key", "rm",
                  f"--uid={USER}", "--key-type=s3", f"--access-key={rgw.access_key}"])
        up("d")
        import boto3
        from botocore.config import Config
        s3k2 = boto3.client("s3", endpoint_url=rgw.endpoint, aws_access_key_id=k2,
                            aws_secret_access_key=s2, region_name=rgw.region,
                            config=Config(s3={"addressing_style": "path"}))
        assert s3k2.get_object(Bucket=rb, Key="p/d")["Body"].read() == b"d"
        assert s2.encode() not in open(d.log_path, "rb").read()
        # the CLI: limits; where it points is refused
        env = dict(os.environ, S3NFS_ADMIN=d.admin_endpoint, S3NFS_ADMIN_TOKEN=d.admin_token)
        p = subprocess.run([CTL, "--json", "remote", "update", str(r["id"]), "--parallel", "3"],
                           env=env, text=True, capture_output=True, timeout=60)
        assert p.returncode == 0 and json.loads(p.stdout)["parallel"] == 3, p.stderr
        p = subprocess.run([CTL, "remote", "update", str(r["id"]), "--endpoint", "http://x"],
                           env=env, text=True, capture_output=True, timeout=60)
        assert p.returncode == 2 and "cannot change" in p.stderr
    finally:
        # the session's RGW user keeps its first key for the other tests
        rgw._run(["radosgw-admin", "-c", rgw.conf, "-n", "client.admin", "key", "create",
                  f"--uid={USER}", "--key-type=s3", f"--access-key={rgw.access_key}",
                  f"--secret={rgw.secret_key}"], check=False)


def test_read_only_from_the_start(daemon_factory, rgw):
    """A read-only level holds from the first request after a restart."""
    dm = daemon_factory(extra_args=FAST).start()
    adm, r, rb, b = tiered(dm, rgw)
    s3 = dm.boto3()
    s3.put_object(Bucket=b, Key="ro/x", Body=b"x")
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "upload_after_s": 3600})
    adm.put(f"/tenants/1/buckets/{b}/tier?dir=ro", {"read_only": True})
    dm.restart()
    s3 = dm.boto3()
    assert s3_err(lambda: s3.put_object(Bucket=b, Key="ro/y", Body=b"y")) == (403, "AccessDenied")
    s3.put_object(Bucket=b, Key="rw/y", Body=b"y")
