# SPDX-License-Identifier: Apache-2.0
"""Directory prefetch on listing (docs/tiering.md § Directory prefetch) against
the session's real Ceph RGW (`rgw`): a cache bucket over a remote bucket of
~150 KB samples pre-filled with boto3;

- with preset DATASET_RO, an S3 ListObjectsV2 of a directory (delimiter "/")
  makes its small objects local without anyone reading them (the per-file
  state on HEAD turns from `evicted` to `uploaded`), a 2 MiB object stays
  remote, another directory stays remote; listing again starts nothing twice;
- an NFS READDIRPLUS of a directory whose directory policy says DATASET_RO does
  the same (and READDIR of its sibling with NONE does not);
- with NONE (the built-in default) a listing prefetches nothing;
- an ordinary tiered bucket (DATASET_RW) whose files were evicted by age: an
  NFS READDIR brings the small ones back, not the 2 MiB one;
- a store over the policy's high watermark prefetches nothing (counted)."""
import concurrent.futures
import hashlib
import os
import re
import sys
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tenants"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "nfs"))
from tenutil import Admin, Nfs  # noqa: E402
from tierutil import add_remote, daemon_fixture, new_bucket, wait_for  # noqa: E402

FAST = ["--set", "tier_allow_private_remotes=true", "--set", "tier_poll_ms=200",
        "--set", "tier_retry_base_ms=200", "--set", "tier_retry_max_ms=1500",
        "--set", "data_file_size=1GiB", "--set", "tier_recall_wait_ms=3000"]
KiB, MiB = 1024, 1024 * 1024
NSAMPLES = 24

d = daemon_fixture("tier-prefetch", FAST)


def body_of(key, n):
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (n // len(seed) + 1))[:n]


def fill(rs3, rb, sizes):
    def put(k):
        rs3.put_object(Bucket=rb, Key=k, Body=body_of(k, sizes[k]))
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(put, sizes))


def dataset(rgw):
    """A remote bucket: samples/ (NSAMPLES of ~150 KB and one of 2 MiB), other/
    (small ones): what it holds under "ds/" and the sizes."""
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "pf-")
    sizes = {f"ds/samples/{i:03d}.bin": 150 * KiB + i * 7 for i in range(NSAMPLES)}
    sizes["ds/samples/big.bin"] = 2 * MiB + 5
    sizes.update({f"ds/other/{i}.bin": 150 * KiB for i in range(3)})
    fill(rs3, rb, sizes)
    return rb, sizes


def cache_bucket(d, rgw, rb, policy):
    adm = Admin(d)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, "ds/")
    b = "pf" + uuid.uuid4().hex[:8]
    d.boto3().create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", dict(policy, remote=r["id"]))
    adm.put(f"/tenants/1/buckets/{b}/cache", {"ttl_s": 300, "read_only": True})
    return adm, b


def state(d, b, k):
    h = d.boto3().head_object(Bucket=b, Key=k)["ResponseMetadata"]["HTTPHeaders"]
    return h.get("x-s3nfs-tier-state")


def metric(d, name):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def small(sizes, d):
    return [k[3:] for k in sizes if k.startswith(f"ds/{d}/") and sizes[k] <= MiB]


def test_s3_listing_prefetches_small_files(d, rgw):
    rb, sizes = dataset(rgw)
    _, b = cache_bucket(d, rgw, rb, {"preset": "DATASET_RO"})
    s3 = d.boto3()
    # the names come in (a lookup is not a listing: nothing is prefetched by it)
    assert state(d, b, "samples/000.bin") == "evicted"
    assert state(d, b, "other/0.bin") == "evicted"
    time.sleep(1.0)
    assert state(d, b, "samples/001.bin") == "evicted"
    files0 = metric(d, "s3nfs_tier_prefetch_files_total")
    recalled0 = metric(d, "s3nfs_tier_recalled_bytes_total")
    got = s3.list_objects_v2(Bucket=b, Prefix="samples/", Delimiter="/")
    assert len(got["Contents"]) == NSAMPLES + 1
    want = small(sizes, "samples")
    wait_for(lambda: all(state(d, b, k) == "uploaded" for k in want), timeout=60,
             what="the small samples prefetched")
    # not read by anyone: the recall brought them; the big one and the other
    # directory stay remote
    assert state(d, b, "samples/big.bin") == "evicted"
    assert all(state(d, b, k) == "evicted" for k in small(sizes, "other"))
    assert metric(d, "s3nfs_tier_prefetch_files_total") - files0 == NSAMPLES
    assert metric(d, "s3nfs_tier_recalled_bytes_total") - recalled0 >= \
        sum(sizes["ds/" + k] for k in want)
    # listing again (and again) starts nothing more: they are local now
    for _ in range(3):
        s3.list_objects_v2(Bucket=b, Prefix="samples/", Delimiter="/")
    time.sleep(1.0)
    assert metric(d, "s3nfs_tier_prefetch_files_total") - files0 == NSAMPLES
    # the bytes are the remote's
    k = "samples/005.bin"
    assert s3.get_object(Bucket=b, Key=k)["Body"].read() == body_of("ds/" + k, sizes["ds/" + k])
    assert state(d, b, "samples/big.bin") == "evicted"


def test_repeated_listings_start_each_file_once(d, rgw):
    """Listings in a burst while the prefetch runs: every file is recalled once."""
    rb, sizes = dataset(rgw)
    _, b = cache_bucket(d, rgw, rb, {"preset": "DATASET_RO"})
    s3 = d.boto3()
    s3.list_objects_v2(Bucket=b, Prefix="other/", Delimiter="/")  # imports, prefetches other/
    wait_for(lambda: all(state(d, b, k) == "uploaded" for k in small(sizes, "other")),
             timeout=60, what="other/ prefetched")
    recalls0 = metric(d, "s3nfs_tier_recalls_total")
    files0 = metric(d, "s3nfs_tier_prefetch_files_total")
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda _: s3.list_objects_v2(Bucket=b, Prefix="samples/", Delimiter="/"),
                    range(8)))
    want = small(sizes, "samples")
    wait_for(lambda: all(state(d, b, k) == "uploaded" for k in want), timeout=60,
             what="the small samples prefetched")
    time.sleep(0.5)
    assert metric(d, "s3nfs_tier_prefetch_files_total") - files0 == NSAMPLES
    assert metric(d, "s3nfs_tier_recalls_total") - recalls0 == NSAMPLES


def test_nfs_readdirplus_prefetches_by_directory_policy(d, rgw):
    rb, sizes = dataset(rgw)
    adm, b = cache_bucket(d, rgw, rb, {})  # NONE on the bucket
    s3 = d.boto3()
    s3.list_objects_v2(Bucket=b, Delimiter="/")  # the root: imports samples/ and other/
    adm.put(f"/tenants/1/buckets/{b}/tier?dir=samples", {"preset": "DATASET_RO"})
    with Nfs(d) as n:
        st, root = n.mount("/")
        assert st == 0
        st, bfh = n.lookup(root, b)
        assert st == 0
        st, sfh = n.lookup(bfh, "samples")
        assert st == 0
        st, ofh = n.lookup(bfh, "other")
        assert st == 0
        assert n.readdirplus(sfh)[0] == 0
        assert n.readdir(ofh)[0] == 0
    want = small(sizes, "samples")
    wait_for(lambda: all(state(d, b, k) == "uploaded" for k in want), timeout=60,
             what="the small samples prefetched")
    assert state(d, b, "samples/big.bin") == "evicted"
    assert all(state(d, b, k) == "evicted" for k in small(sizes, "other"))


def test_none_prefetches_nothing(d, rgw):
    rb, sizes = dataset(rgw)
    _, b = cache_bucket(d, rgw, rb, {"preset": "NONE"})
    s3 = d.boto3()
    files0 = metric(d, "s3nfs_tier_prefetch_files_total")
    s3.list_objects_v2(Bucket=b, Prefix="samples/", Delimiter="/")
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        st, sfh = n.lookup(bfh, "samples")
        assert st == 0
        assert n.readdirplus(sfh)[0] == 0
    time.sleep(2.0)
    assert all(state(d, b, k) == "evicted" for k in small(sizes, "samples"))
    assert metric(d, "s3nfs_tier_prefetch_files_total") == files0


def test_tiered_bucket_with_evicted_files(d, rgw):
    """Not only cache buckets: a tiered bucket (DATASET_RW) whose files were
    uploaded and evicted by age brings the small ones of a listed directory
    back (a prefetched file counts as read: evicted again after evict_after_s)."""
    rs3 = rgw.boto3()
    rb = new_bucket(rs3, "pf-")
    adm = Admin(d)
    r = add_remote(adm, rgw.endpoint, rgw.access_key, rgw.secret_key, rb, "t/")
    b = "pt" + uuid.uuid4().hex[:8]
    s3 = d.boto3()
    s3.create_bucket(Bucket=b)
    adm.put(f"/tenants/1/buckets/{b}/tier", {"remote": r["id"], "preset": "DATASET_RW",
                                             "upload_after_s": 0, "evict_after_s": 2})
    files = {f"set/{i}.bin": body_of(f"set/{i}", 100 * KiB + i) for i in range(6)}
    files["set/big.bin"] = body_of("set/big", 2 * MiB)
    for k, v in files.items():
        s3.put_object(Bucket=b, Key=k, Body=v)
    wait_for(lambda: all(state(d, b, k) == "evicted" for k in files), timeout=60,
             what="every file evicted")
    files0 = metric(d, "s3nfs_tier_prefetch_files_total")
    bytes0 = metric(d, "s3nfs_tier_prefetch_bytes_total")
    recalled0 = metric(d, "s3nfs_tier_recalled_bytes_total")
    with Nfs(d) as n:
        st, root = n.mount("/")
        st, bfh = n.lookup(root, b)
        st, sfh = n.lookup(bfh, "set")
        assert st == 0
        assert n.readdir(sfh)[0] == 0
    small_keys = [k for k in files if len(files[k]) <= MiB]
    want = sum(len(files[k]) for k in small_keys)
    wait_for(lambda: metric(d, "s3nfs_tier_recalled_bytes_total") - recalled0 >= want,
             timeout=60, what="the small files recalled")
    assert metric(d, "s3nfs_tier_prefetch_files_total") - files0 == len(small_keys)
    assert metric(d, "s3nfs_tier_prefetch_bytes_total") - bytes0 == want
    assert metric(d, "s3nfs_tier_recalled_bytes_total") - recalled0 < want + MiB  # not big
    assert state(d, b, "set/big.bin") == "evicted"
    for k, v in files.items():
        assert s3.get_object(Bucket=b, Key=k)["Body"].read() == v


def skipped_full(d):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^s3nfs_tier_prefetch_skipped_total\{reason="full"\} (\S+)$', text, re.M)
    return float(m.group(1))


def test_no_prefetch_past_the_high_watermark(d, rgw):
    """0.02 % of the store is less than what it holds already: nothing comes back."""
    s3 = d.boto3()
    local = "pl" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=local)
    s3.put_object(Bucket=local, Key="fill", Body=os.urandom(2 * MiB))  # the store holds 2 MiB
    rb, sizes = dataset(rgw)
    _, b = cache_bucket(d, rgw, rb, {"preset": "DATASET_RO",
                                     "evict_watermark": {"high": 0.02, "low": 0.01}})
    full0 = skipped_full(d)
    files0 = metric(d, "s3nfs_tier_prefetch_files_total")
    s3.list_objects_v2(Bucket=b, Prefix="samples/", Delimiter="/")
    wait_for(lambda: skipped_full(d) - full0 == NSAMPLES, timeout=30,
             what="the samples left out")
    assert metric(d, "s3nfs_tier_prefetch_files_total") == files0
    assert all(state(d, b, k) == "evicted" for k in small(sizes, "samples"))
