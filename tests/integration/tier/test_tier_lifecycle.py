# SPDX-License-Identifier: Apache-2.0
"""Lifecycle Transition to the remote tier, against the session's real Ceph RGW,
with the accelerated lifecycle clock (lifecycle_day_s=2: a lifecycle day is two
seconds; lifecycle_interval_s=1) (docs/tiering.md, "Lifecycle Transition"):

- a bucket's tier policy names the S3 storage class its remote stands for
  (storage_class, default STANDARD_IA); PutBucketLifecycleConfiguration
  accepts a Transition only to that class (InvalidStorageClass otherwise,
  InvalidRequest without a tier policy, 501 for NoncurrentVersionTransition);
  GetBucketLifecycleConfiguration round-trips it;
- a Transition (Days, Date) that fires copies the object to the remote at once
  (whatever upload_after_s) and frees its local bytes (whatever the policy's
  eviction settings): the object on RGW, read with boto3, has its bytes; the
  tier state says evicted; HEAD, GET and listings show the storage class; GET
  still answers the bytes (a recall);
- filters (prefix, size, tags, And) are respected, and pinned prefixes win:
  objects they leave out stay local and STANDARD;
- the same with the aws cli (put, get, the error, head-object, list);
- SIGKILL during transitions: the store check is clean, the work finishes after
  a restart, every byte reads back;
- a versioned bucket: the current version transitions (evicted, its class in
  ListObjectVersions), noncurrent ones stay local and read by versionId, also
  when they share extents with the current one (an NFS change of a version;
  usage then counts the evicted version's bytes on top of the shared extents);
  NFS and S3 reads of the current one recall it; a
  PUT or a DELETE (delete marker) over the evicted current version recalls it
  first, so the new noncurrent version reads back; SIGKILL during transitions
  in a versioned bucket: the store check is clean, every version reads back."""
import datetime
import json
import os
import subprocess
import sys
import time
import uuid

import botocore.exceptions
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from s3nfsd_harness import BIN  # noqa: E402
from tenutil import FILE_SYNC, Admin, Nfs  # noqa: E402
import tierutil  # noqa: E402
from tierutil import add_remote, daemon_fixture  # noqa: E402

MiB = 1024 * 1024
ARGS = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "data_file_size=1GiB", "--set", "lifecycle_day_s=2",
        "--set", "lifecycle_interval_s=1", "--set", "settle_ms=300"]
WAIT = 90  # a rule needs a day (2 s), an upload and a lifecycle pass; the machine is shared


d = daemon_fixture("tier-lc", ARGS)


def wait_for(pred, timeout=WAIT, step=0.25, what="condition"):
    return tierutil.wait_for(pred, timeout, step, what)


def s3_error(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        r = e.response
        return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"], r["Error"].get(
            "Message", "")
    raise AssertionError("no error")


def tiered_bucket(d, rgw, versioning=False, **policy):
    """A bucket of @d with a tier policy naming a fresh RGW bucket; returns (bucket,
    remote bucket)."""
    rs3 = rgw.boto3()
    rb = "lc-" + uuid.uuid4().hex[:10]
    rs3.create_bucket(Bucket=rb)
    adm = Admin(d)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb)
    b = "tl" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    if versioning:
        d.boto3().put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    body = {"remote": r["id"]}
    body.update(policy)
    got = adm.put(f"/tenants/1/buckets/{b}/tier", body)
    assert got["storage_class"] == policy.get("storage_class", "STANDARD_IA"), got
    wait_for(lambda: adm.get(f"/tenants/1/buckets/{b}/tier")["uploads"] is not None,
             what="a first pass")
    return b, rb


def head(d, b, k):
    return d.boto3().head_object(Bucket=b, Key=k)


def state(d, b, k):
    return head(d, b, k)["ResponseMetadata"]["HTTPHeaders"].get("x-s3nfs-tier-state")


def put_rules(s3, b, *rules):
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": list(rules)})


def test_transition_days_filters_and_reads(d, rgw):
    # upload_after_s of an hour and no eviction settings: the Transition alone
    # makes the objects go to the remote and leave the local store
    b, rb = tiered_bucket(d, rgw, upload_after_s=3600, storage_class="GLACIER")
    s3 = d.boto3()
    objs = {
        "cold/a.bin": os.urandom(3 * MiB + 17),    # prefix and size: goes
        "cold/tiny.bin": os.urandom(900),          # too small for the rule: stays
        "hot/b.bin": os.urandom(2 * MiB),          # another prefix: stays
        "misc/t.bin": os.urandom(MiB + 5),         # tagged tier=cold: goes
        "misc/u.bin": os.urandom(MiB + 7),         # tagged tier=hot: stays
        "late.bin": os.urandom(MiB + 9),           # no rule: stays local (written last)
    }
    for k, v in objs.items():
        tag = {"misc/t.bin": "tier=cold", "misc/u.bin": "tier=hot"}.get(k)
        kw = {"Tagging": tag} if tag else {}
        s3.put_object(Bucket=b, Key=k, Body=v, ContentType="application/x-test", **kw)
    etags = {k: head(d, b, k)["ETag"] for k in objs}
    rules = [
        {"ID": "cold-big", "Status": "Enabled",
         "Filter": {"And": {"Prefix": "cold/", "ObjectSizeGreaterThan": 1000}},
         "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]},
        {"ID": "tagged", "Status": "Enabled",
         "Filter": {"Tag": {"Key": "tier", "Value": "cold"}},
         "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]},
    ]
    put_rules(s3, b, *rules)
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
    assert [r["ID"] for r in got] == ["cold-big", "tagged"]
    assert got[0]["Transitions"] == [{"Days": 1, "StorageClass": "GLACIER"}]
    assert got[0]["Filter"] == {"And": {"Prefix": "cold/", "ObjectSizeGreaterThan": 1000}}
    assert got[1]["Transitions"] == [{"Days": 1, "StorageClass": "GLACIER"}]
    # the Transition fires: copied (confirmed), then evicted
    for k in ("cold/a.bin", "misc/t.bin"):
        wait_for(lambda k=k: state(d, b, k) == "evicted", what=f"{k} transitioned")
    rs3 = rgw.boto3()
    for k in ("cold/a.bin", "misc/t.bin"):
        assert rs3.get_object(Bucket=rb, Key="p/" + k)["Body"].read() == objs[k], k
    # what HEAD and listings show
    for k in ("cold/a.bin", "misc/t.bin"):
        h = head(d, b, k)
        assert h["StorageClass"] == "GLACIER", k
        assert h["ResponseMetadata"]["HTTPHeaders"]["x-amz-storage-class"] == "GLACIER"
        assert h["ETag"] == etags[k] and h["ContentLength"] == len(objs[k])
    up = Admin(d).get(f"/tenants/1/buckets/{b}/tier")["uploads"]
    assert up is not None
    wait_for(lambda: Admin(d).get(f"/tenants/1/buckets/{b}/tier")["uploads"]["evicted_files"]
             == 2, what="stats: 2 evicted")
    # a few more lifecycle days: what the filters leave out stays local and STANDARD
    time.sleep(6)
    for k in ("cold/tiny.bin", "hot/b.bin", "misc/u.bin"):
        h = head(d, b, k)
        # local, or uploaded: a Transition waiting for its copy has the uploader copy
        # every file changed before it at once (docs/tiering.md)
        assert h["ResponseMetadata"]["HTTPHeaders"]["x-s3nfs-tier-state"] in (
            "local", "uploaded"), k
        assert "StorageClass" not in h, k  # STANDARD: not sent, as AWS
    lst = {o["Key"]: o["StorageClass"] for o in s3.list_objects_v2(Bucket=b)["Contents"]}
    assert lst == {"cold/a.bin": "GLACIER", "cold/tiny.bin": "STANDARD", "hot/b.bin": "STANDARD",
                   "misc/t.bin": "GLACIER", "misc/u.bin": "STANDARD", "late.bin": "STANDARD"}
    # written after every object a rule takes, it is not hastened: upload_after_s holds
    assert state(d, b, "late.bin") == "local"
    lst1 = {o["Key"]: o["StorageClass"] for o in s3.list_objects(Bucket=b)["Contents"]}
    assert lst1 == lst
    vers = {v["Key"]: v["StorageClass"] for v in s3.list_object_versions(Bucket=b)["Versions"]}
    assert vers == lst
    attrs = s3.get_object_attributes(Bucket=b, Key="cold/a.bin",
                                     ObjectAttributes=["StorageClass", "ObjectSize"])
    assert attrs["StorageClass"] == "GLACIER" and attrs["ObjectSize"] == len(objs["cold/a.bin"])
    # GET still answers the bytes (recalled from RGW), ranged and whole
    a = objs["cold/a.bin"]
    r = s3.get_object(Bucket=b, Key="cold/a.bin", Range="bytes=1000-2999")
    assert r["StorageClass"] == "GLACIER"  # the first read: its headers come before the recall
    assert r["Body"].read() == a[1000:3000]
    assert s3.get_object(Bucket=b, Key="cold/a.bin")["Body"].read() == a
    assert s3.get_object(Bucket=b, Key="misc/t.bin")["Body"].read() == objs["misc/t.bin"]
    # recalled bytes are a cache: the rule still holds, the next passes evict them again
    wait_for(lambda: state(d, b, "cold/a.bin") == "evicted", what="evicted again")
    assert s3.get_object(Bucket=b, Key="hot/b.bin")["Body"].read() == objs["hot/b.bin"]


def test_transition_date_and_pins(d, rgw):
    # a Date in the past fires at once; a pinned prefix wins over the rule
    b, rb = tiered_bucket(d, rgw, upload_after_s=0, storage_class="DEEP_ARCHIVE",
                          pin_prefixes=["keep/"])
    s3 = d.boto3()
    go, keep = os.urandom(MiB + 1), os.urandom(MiB + 2)
    s3.put_object(Bucket=b, Key="data/go.bin", Body=go)
    s3.put_object(Bucket=b, Key="keep/stay.bin", Body=keep)
    put_rules(s3, b, {"ID": "dated", "Status": "Enabled", "Filter": {},
                      "Transitions": [{"Date": datetime.datetime(
                          2020, 1, 1, tzinfo=datetime.timezone.utc),
                          "StorageClass": "DEEP_ARCHIVE"}]})
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"][0]["Transitions"][0]
    assert got["StorageClass"] == "DEEP_ARCHIVE"
    assert got["Date"] == datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    wait_for(lambda: state(d, b, "data/go.bin") == "evicted", what="go transitioned")
    assert head(d, b, "data/go.bin")["StorageClass"] == "DEEP_ARCHIVE"
    assert rgw.boto3().get_object(Bucket=rb, Key="p/data/go.bin")["Body"].read() == go
    wait_for(lambda: state(d, b, "keep/stay.bin") == "uploaded", what="pinned uploaded")
    time.sleep(4)
    assert state(d, b, "keep/stay.bin") == "uploaded"  # pinned: stays local
    assert "StorageClass" not in head(d, b, "keep/stay.bin")
    assert s3.get_object(Bucket=b, Key="data/go.bin")["Body"].read() == go


def test_transition_put_errors(d, rgw):
    s3 = d.boto3()
    rule = {"ID": "t", "Status": "Enabled", "Filter": {},
            "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]}
    # no tier policy: InvalidRequest
    plain = "tp" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=plain)
    st, code, msg = s3_error(lambda: put_rules(s3, plain, rule))
    assert (st, code) == (400, "InvalidRequest") and "tier policy" in msg
    # a policy without storage_class stands for STANDARD_IA
    b, _ = tiered_bucket(d, rgw)
    st, code, msg = s3_error(lambda: put_rules(s3, b, rule))
    assert (st, code) == (400, "InvalidStorageClass") and "STANDARD_IA" in msg, msg
    for bad in ("STANDARD", "REDUCED_REDUNDANCY", "FOO"):
        r = dict(rule, Transitions=[{"Days": 30, "StorageClass": bad}])
        assert s3_error(lambda r=r: put_rules(s3, b, r))[:2] == (400, "InvalidStorageClass"), bad
    # NoncurrentVersionTransition: not built
    r = dict(rule, Transitions=[{"Days": 30, "StorageClass": "STANDARD_IA"}],
             NoncurrentVersionTransitions=[{"NoncurrentDays": 3, "StorageClass": "STANDARD_IA"}])
    st, code, msg = s3_error(lambda: put_rules(s3, b, r))
    assert (st, code) == (501, "NotImplemented") and "NoncurrentVersionTransition" in msg
    assert s3_error(lambda: s3.get_bucket_lifecycle_configuration(Bucket=b))[1] == \
        "NoSuchLifecycleConfiguration"
    # the class the remote stands for: accepted and round-tripped
    ok = dict(rule, Transitions=[{"Days": 30, "StorageClass": "STANDARD_IA"}],
              Expiration={"Days": 400})
    put_rules(s3, b, ok)
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"][0]
    assert got["Transitions"] == [{"Days": 30, "StorageClass": "STANDARD_IA"}]
    assert got["Expiration"] == {"Days": 400}
    # the admin API: storage_class validated and answered
    adm = Admin(d)
    pol = adm.get(f"/tenants/1/buckets/{b}/tier")
    assert pol["storage_class"] == "STANDARD_IA"
    st, js = adm.call("PUT", f"/tenants/1/buckets/{b}/tier",
                      {"remote": pol["remote"], "storage_class": "STANDARD"})
    assert st == 400 and "storage_class" in str(js), js
    st, js = adm.call("PUT", f"/tenants/1/buckets/{b}/tier",
                      {"remote": pol["remote"], "storage_class": "GLACIER_IR"})
    assert st == 200 and js["storage_class"] == "GLACIER_IR", js
    assert adm.get(f"/tenants/1/buckets/{b}/tier")["storage_class"] == "GLACIER_IR"
    # a versioned bucket: accepted (its current versions transition); still not
    # NoncurrentVersionTransition
    vb, _ = tiered_bucket(d, rgw, versioning=True, storage_class="GLACIER")
    put_rules(s3, vb, rule)
    assert s3.get_bucket_lifecycle_configuration(Bucket=vb)["Rules"][0]["Transitions"] == \
        rule["Transitions"]
    r = dict(rule, NoncurrentVersionTransitions=[{"NoncurrentDays": 3,
                                                  "StorageClass": "GLACIER"}])
    st, code, msg = s3_error(lambda: put_rules(s3, vb, r))
    assert (st, code) == (501, "NotImplemented") and "NoncurrentVersionTransition" in msg


AWS = "/usr/bin/aws"


@pytest.mark.skipif(not os.access(AWS, os.X_OK), reason="aws cli not installed")
def test_aws_cli_transition(d, rgw, tmp_path):
    b, rb = tiered_bucket(d, rgw, upload_after_s=3600, storage_class="GLACIER_IR")
    body = os.urandom(MiB + 3)
    d.boto3().put_object(Bucket=b, Key="ckpt/1.bin", Body=body)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=d.access_key, AWS_SECRET_ACCESS_KEY=d.secret_key,
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_PAGER="")

    def aws(*args):
        return subprocess.run([AWS, "--endpoint-url", d.s3_endpoint, "--output", "json",
                               "s3api"] + list(args), env=env, capture_output=True, text=True,
                              timeout=60)
    bad = {"Rules": [{"ID": "r", "Status": "Enabled", "Filter": {"Prefix": "ckpt/"},
                      "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    r = aws("put-bucket-lifecycle-configuration", "--bucket", b,
            "--lifecycle-configuration", f"file://{tmp_path / 'bad.json'}")
    assert r.returncode != 0 and "InvalidStorageClass" in r.stderr, r.stderr
    assert "GLACIER_IR" in r.stderr  # says which class the remote stands for
    cfg = {"Rules": [{"ID": "r", "Status": "Enabled", "Filter": {"Prefix": "ckpt/"},
                      "Transitions": [{"Days": 1, "StorageClass": "GLACIER_IR"}]}]}
    (tmp_path / "lc.json").write_text(json.dumps(cfg))
    r = aws("put-bucket-lifecycle-configuration", "--bucket", b,
            "--lifecycle-configuration", f"file://{tmp_path / 'lc.json'}")
    assert r.returncode == 0, r.stderr
    r = aws("get-bucket-lifecycle-configuration", "--bucket", b)
    assert r.returncode == 0 and json.loads(r.stdout)["Rules"] == cfg["Rules"], r.stderr
    wait_for(lambda: state(d, b, "ckpt/1.bin") == "evicted", what="transitioned")
    r = aws("head-object", "--bucket", b, "--key", "ckpt/1.bin")
    assert r.returncode == 0 and json.loads(r.stdout)["StorageClass"] == "GLACIER_IR", r.stdout
    r = aws("list-objects-v2", "--bucket", b)
    assert json.loads(r.stdout)["Contents"][0]["StorageClass"] == "GLACIER_IR", r.stdout
    assert rgw.boto3().get_object(Bucket=rb, Key="p/ckpt/1.bin")["Body"].read() == body


def _try_get(d, b, k):
    try:
        return d.boto3().get_object(Bucket=b, Key=k)["Body"].read()
    except (botocore.exceptions.ClientError, botocore.exceptions.ResponseStreamingError,
            botocore.exceptions.EndpointConnectionError, ConnectionError):
        return None


def check_store(d):
    r = subprocess.run([BIN, "--data-dir", d.data_dir, "--set", "data_file_size=1GiB",
                        "--check-store"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"store check failed:\n{r.stdout}\n{r.stderr[-3000:]}"
    assert "store check: consistent" in r.stdout


def test_sigkill_during_transitions(daemon_factory, rgw):
    # killed while the lifecycle worker evicts: every eviction is done or not, the
    # store check is clean, the next passes finish the work, every byte reads back
    dm = daemon_factory(extra_args=ARGS).start()
    b, rb = tiered_bucket(dm, rgw, upload_after_s=3600, storage_class="GLACIER")
    s3 = dm.boto3()
    files = {f"k{i:02d}": os.urandom(300_000 + i * 4099) for i in range(30)}
    for k, v in files.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    put_rules(s3, b, {"ID": "all", "Status": "Enabled", "Filter": {},
                      "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]})
    wait_for(lambda: any(state(dm, b, k) == "evicted" for k in files), step=0.05,
             what="a first transition")
    dm.kill()
    check_store(dm)
    dm.start()
    for k in files:
        wait_for(lambda k=k: state(dm, b, k) == "evicted", what=f"{k} transitioned")
    dm.kill()
    check_store(dm)
    dm.start()
    for k, v in files.items():
        got = wait_for(lambda k=k: _try_get(dm, b, k), what=f"{k} readable")
        assert got == v, k
    assert rgw.boto3().get_object(Bucket=rb, Key="p/k07")["Body"].read() == files["k07"]
    dm.stop()
    check_store(dm)


# ---- versioned buckets ----

JUKEBOX = 10008


def versions(s3, b, key):
    """{VersionId: (IsLatest, StorageClass)} of @key's data versions, and its markers."""
    r = s3.list_object_versions(Bucket=b, Prefix=key)
    vs = {v["VersionId"]: (v["IsLatest"], v["StorageClass"]) for v in r.get("Versions", [])
          if v["Key"] == key}
    dms = [m["VersionId"] for m in r.get("DeleteMarkers", []) if m["Key"] == key]
    return vs, dms


def vget(d, b, k, vid=None):
    kw = {"VersionId": vid} if vid else {}
    return d.boto3().get_object(Bucket=b, Key=k, **kw)["Body"].read()


def vstate(d, b, k, vid):
    h = d.boto3().head_object(Bucket=b, Key=k, VersionId=vid)
    return h["ResponseMetadata"]["HTTPHeaders"].get("x-s3nfs-tier-state")


def nfs_fh(n, b, key):
    st, root = n.mount("/")
    assert st == 0
    st, fh = n.lookup(root, b)
    assert st == 0
    for part in key.split("/"):
        st, fh = n.lookup(fh, part)
        assert st == 0, (key, st)
    return fh


def nfs_read_all(n, fh, size):
    out = b""
    while len(out) < size:
        for _try in range(100):
            st, r = n.read(fh, len(out), 1 << 16)
            if st != JUKEBOX:
                break
            time.sleep(0.1)
        assert st == 0, st
        if not r[0]:
            break
        out += r[0]
    return out


def usage(d, b):
    return Admin(d).get(f"/tenants/1/buckets/{b}/usage")["bytes"]


def test_transition_versioned_bucket(d, rgw):
    b, rb = tiered_bucket(d, rgw, versioning=True, upload_after_s=3600, storage_class="GLACIER")
    s3 = d.boto3()
    k, shared = "ckpt/m.bin", "ckpt/shared.bin"
    v1, v2 = os.urandom(2 * MiB + 11), os.urandom(3 * MiB + 5)
    id1 = s3.put_object(Bucket=b, Key=k, Body=v1)["VersionId"]
    id2 = s3.put_object(Bucket=b, Key=k, Body=v2)["VersionId"]
    # a version made by an NFS change of a settled object shares its unchanged extents
    s1 = os.urandom(4 * MiB + 3)
    sid1 = s3.put_object(Bucket=b, Key=shared, Body=s1)["VersionId"]
    s2 = s1[:5000] + b"NFS" + s1[5003:]
    with Nfs(d) as n:
        fh = nfs_fh(n, b, shared)
        st, _ = n.write(fh, 5000, b"NFS", FILE_SYNC)
        assert st == 0, st
    wait_for(lambda: len(versions(s3, b, shared)[0]) == 2, what="the NFS change's version")
    wait_for(lambda: vget(d, b, shared) == s2, what="the NFS change read back")
    sid2 = [v for v in versions(s3, b, shared)[0] if v != sid1][0]
    before = usage(d, b)
    put_rules(s3, b, {"ID": "ckpt", "Status": "Enabled", "Filter": {"Prefix": "ckpt/"},
                      "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]})
    for key in (k, shared):
        wait_for(lambda key=key: state(d, b, key) == "evicted", what=f"{key} transitioned")
    # the current version only: listings say so; the noncurrent ones stay local
    assert versions(s3, b, k) == ({id2: (True, "GLACIER"), id1: (False, "STANDARD")}, [])
    assert versions(s3, b, shared) == ({sid2: (True, "GLACIER"), sid1: (False, "STANDARD")},
                                       [])
    assert vstate(d, b, k, id1) != "evicted"
    assert rgw.boto3().get_object(Bucket=rb, Key="p/" + k)["Body"].read() == v2
    assert rgw.boto3().get_object(Bucket=rb, Key="p/" + shared)["Body"].read() == s2
    # usage (quotas): the evicted current versions keep counting their bytes; the
    # extents the NFS-made version shares stay local with it, and the evicted version's
    # bytes now count on top of them (its one changed 1 MiB extent was freed)
    after = usage(d, b)
    assert before + len(s2) - 2 * MiB <= after <= before + len(s2), (before, after)
    # noncurrent versions read by versionId, the shared extents kept theirs
    assert vget(d, b, k, id1) == v1
    assert vget(d, b, shared, sid1) == s1
    # NFS reads the transitioned current version (a recall)
    wait_for(lambda: state(d, b, shared) == "evicted", what="shared evicted")
    with Nfs(d) as n:
        assert nfs_read_all(n, nfs_fh(n, b, shared), len(s2)) == s2
    # S3 reads it, also by its versionId
    assert vget(d, b, k) == v2
    assert vget(d, b, k, id2) == v2
    assert vget(d, b, shared, sid1) == s1
    # a PUT over the evicted current version: it is recalled first, then kept as a
    # noncurrent version with its bytes
    wait_for(lambda: state(d, b, k) == "evicted", what=f"{k} evicted again")
    v3 = os.urandom(MiB + 1)
    id3 = s3.put_object(Bucket=b, Key=k, Body=v3)["VersionId"]
    assert vget(d, b, k, id2) == v2
    assert vstate(d, b, k, id2) != "evicted"
    assert vget(d, b, k) == v3
    wait_for(lambda: state(d, b, k) == "evicted", what="the new current version transitioned")
    vs, _ = versions(s3, b, k)
    assert vs == {id3: (True, "GLACIER"), id2: (False, "STANDARD"), id1: (False, "STANDARD")}
    # a DELETE: a delete marker; the evicted version is recalled first and reads back
    dm = s3.delete_object(Bucket=b, Key=k)
    assert dm["DeleteMarker"] is True
    vs, dms = versions(s3, b, k)
    assert dms == [dm["VersionId"]]
    assert vs == {id3: (False, "STANDARD"), id2: (False, "STANDARD"), id1: (False, "STANDARD")}
    st = s3_error(lambda: s3.get_object(Bucket=b, Key=k))
    assert st[:2] == (404, "NoSuchKey")
    assert vget(d, b, k, id3) == v3
    assert vget(d, b, k, id2) == v2
    assert vget(d, b, k, id1) == v1
    # the NFS-changed key: an NFS REMOVE of its evicted current version also keeps it
    wait_for(lambda: state(d, b, shared) == "evicted", what="shared evicted again")
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        st, dfh = n.lookup(bfh, "ckpt")
        for _try in range(100):
            st = n.remove(dfh, "shared.bin")
            if st != JUKEBOX:
                break
            time.sleep(0.1)
        assert st == 0, st
    assert vget(d, b, shared, sid2) == s2
    assert vget(d, b, shared, sid1) == s1
    assert usage(d, b) >= len(v1) + len(v2) + len(v3) + len(s1)


def test_sigkill_during_versioned_transitions(daemon_factory, rgw):
    dm = daemon_factory(extra_args=ARGS).start()
    b, rb = tiered_bucket(dm, rgw, versioning=True, upload_after_s=3600,
                          storage_class="GLACIER")
    s3 = dm.boto3()
    vers = {}  # key -> [(VersionId, bytes)], oldest first
    for i in range(20):
        k = f"k{i:02d}"
        for j in range(2):
            v = os.urandom(200_000 + i * 4099 + j * 77)
            vers.setdefault(k, []).append((s3.put_object(Bucket=b, Key=k, Body=v)["VersionId"],
                                           v))
    # one more key whose current version shares extents with its noncurrent one
    s1 = os.urandom(3 * MiB + 1)
    sid1 = s3.put_object(Bucket=b, Key="shared", Body=s1)["VersionId"]
    s2 = s1[:100] + b"nfs" + s1[103:]
    with Nfs(dm) as n:
        st, _ = n.write(nfs_fh(n, b, "shared"), 100, b"nfs", FILE_SYNC)
        assert st == 0, st
    wait_for(lambda: len(versions(s3, b, "shared")[0]) == 2, what="the NFS change's version")
    put_rules(s3, b, {"ID": "all", "Status": "Enabled", "Filter": {},
                      "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]})
    wait_for(lambda: any(state(dm, b, k) == "evicted" for k in vers), step=0.05,
             what="a first transition")
    dm.kill()
    check_store(dm)
    dm.start()
    for k in list(vers) + ["shared"]:
        wait_for(lambda k=k: state(dm, b, k) == "evicted", what=f"{k} transitioned")
    # a PUT over an evicted version, killed right after: the recalled old version stays
    new = os.urandom(123_457)
    s3.put_object(Bucket=b, Key="k03", Body=new)
    dm.kill()
    check_store(dm)
    dm.start()
    for k, vl in vers.items():
        for vid, v in vl:
            got = wait_for(lambda k=k, vid=vid: _try_vget(dm, b, k, vid),
                           what=f"{k} {vid} readable")
            assert got == v, (k, vid)
        assert _try_get(dm, b, k) == (new if k == "k03" else vl[-1][1]), k
    assert _try_vget(dm, b, "shared", sid1) == s1
    assert wait_for(lambda: _try_get(dm, b, "shared"), what="shared readable") == s2
    dm.stop()
    check_store(dm)


def _try_vget(d, b, k, vid):
    try:
        return vget(d, b, k, vid)
    except (botocore.exceptions.ClientError, botocore.exceptions.ResponseStreamingError,
            botocore.exceptions.EndpointConnectionError, ConnectionError):
        return None
