# SPDX-License-Identifier: Apache-2.0
"""/metrics scraped and parsed with prometheus_client's text parser: per tenant,
protocol and operation the ops, errors, payload bytes and latency histograms;
the same per bucket (s3nfs_bucket_*, labelled with the bucket's name); store
capacity; tenant and bucket usage and quota gauges. The counters move as S3 and
NFS traffic of a fresh tenant flows, each bucket's series only with its own
traffic, and nothing of it is counted for another tenant."""
import math
import os
import sys
import urllib.request

import pytest
from botocore.exceptions import ClientError
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenutil import Admin, Nfs, make_tenant, s3_for  # noqa: E402


def scrape(d):
    with urllib.request.urlopen(d.admin_endpoint + "/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(fams, family, suffix="", **labels):
    """Samples of @family (sample name family+suffix) whose labels include @labels."""
    f = fams.get(family)
    if not f:
        return []
    return [s for s in f.samples if s.name == family + suffix
            and all(s.labels.get(k) == str(v) for k, v in labels.items())]


def total(fams, family, suffix="", **labels):
    return sum(s.value for s in samples(fams, family, suffix, **labels))


def by_op(fams, family, suffix="", **labels):
    return {s.labels["op"]: s.value for s in samples(fams, family, suffix, **labels)}


def find_op(ops, *names):
    for n in ops:
        if n.lower() in names:
            return n
    raise AssertionError(f"none of {names} in {sorted(ops)}")


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


def test_families_and_types(d):
    d.boto3().list_buckets()
    fams = scrape(d)
    types = {"s3nfs_ops": "counter", "s3nfs_op_errors": "counter", "s3nfs_bytes_in": "counter",
             "s3nfs_bytes_out": "counter", "s3nfs_op_latency_seconds": "histogram",
             "s3nfs_store_capacity_bytes": "gauge", "s3nfs_store_free_bytes": "gauge",
             "s3nfs_tenant_bytes": "gauge", "s3nfs_tenant_inodes": "gauge",
             "s3nfs_tenant_bytes_limit": "gauge", "s3nfs_tenant_inodes_limit": "gauge"}
    for name, typ in types.items():
        assert name in fams, name
        assert fams[name].type == typ, (name, fams[name].type)
    cap = total(fams, "s3nfs_store_capacity_bytes")
    free = total(fams, "s3nfs_store_free_bytes")
    assert cap > 0 and 0 <= free <= cap
    for s in samples(fams, "s3nfs_ops", "_total"):
        assert set(s.labels) == {"proto", "op", "tenant"}


def check_histogram(fams, family="s3nfs_op_latency_seconds", **labels):
    """Buckets cumulative, +Inf equal to _count, _sum positive."""
    buckets = samples(fams, family, "_bucket", **labels)
    assert buckets, labels
    les = sorted(buckets, key=lambda s: float(s.labels["le"]))
    vals = [s.value for s in les]
    assert vals == sorted(vals), vals
    assert math.isinf(float(les[-1].labels["le"]))
    count = total(fams, family, "_count", **labels)
    assert les[-1].value == count > 0
    assert total(fams, family, "_sum", **labels) > 0
    assert float(les[0].labels["le"]) <= 0.0001 and float(les[-2].labels["le"]) >= 10


def test_counters_move_with_s3_and_nfs_traffic(d):
    adm = Admin(d)
    t = make_tenant(adm, "metrics-t", clients=["127.0.0.1/32"], export_path="/metrics-t")
    other = make_tenant(adm, "metrics-other")
    tl = {"tenant": t.id}
    s3 = s3_for(d, t)
    s3.create_bucket(Bucket="mbucket")
    before = scrape(d)
    other_before = total(before, "s3nfs_ops", "_total", tenant=other.id)

    # S3: 3 PUTs of 100 KiB, 2 GETs, 1 failing GET
    body = os.urandom(100 << 10)
    for i in range(3):
        s3.put_object(Bucket="mbucket", Key=f"k{i}", Body=body)
    for i in range(2):
        assert s3.get_object(Bucket="mbucket", Key=f"k{i}")["Body"].read() == body
    with pytest.raises(ClientError):
        s3.get_object(Bucket="mbucket", Key="missing")
    # NFS: create, write 64 KiB, read it back, a failing LOOKUP
    with Nfs(d) as c:
        st, root = c.mount("/metrics-t")
        assert st == 0
        st, b = c.lookup(root, "mbucket")
        assert st == 0
        st, fh = c.create(b, "nfsfile")
        assert st == 0
        st, n = c.write_all(fh, b"n" * (64 << 10))
        assert st == 0
        assert c.read_all(fh) == b"n" * (64 << 10)
        assert c.lookup(b, "missing")[0] != 0
    adm.put(f"/tenants/{t.id}/quota", {"bytes_limit": 50 << 20, "inodes_limit": 500})
    after = scrape(d)

    def delta(family, suffix="_total", **labels):
        return total(after, family, suffix, **labels) - total(before, family, suffix, **labels)

    # S3 per operation
    s3ops = by_op(after, "s3nfs_ops", "_total", proto="s3", **tl)
    put, get = find_op(s3ops, "putobject"), find_op(s3ops, "getobject")
    assert delta("s3nfs_ops", proto="s3", op=put, **tl) == 3
    assert delta("s3nfs_ops", proto="s3", op=get, **tl) == 3
    assert delta("s3nfs_op_errors", proto="s3", op=get, **tl) == 1
    assert delta("s3nfs_op_errors", proto="s3", op=put, **tl) == 0
    assert delta("s3nfs_bytes_in", proto="s3", op=put, **tl) == 3 * len(body)
    assert delta("s3nfs_bytes_out", proto="s3", op=get, **tl) >= 2 * len(body)
    check_histogram(after, proto="s3", op=put, **tl)
    assert delta("s3nfs_op_latency_seconds", "_count", proto="s3", op=put, **tl) == 3
    # NFS per operation
    nfsops = by_op(after, "s3nfs_ops", "_total", proto="nfs", **tl)
    w, r = find_op(nfsops, "write"), find_op(nfsops, "read")
    lk = find_op(nfsops, "lookup")
    assert delta("s3nfs_ops", proto="nfs", op=w, **tl) >= 1
    # NFS counts payload only: WRITE data in, READ data out (no RPC/XDR framing)
    assert delta("s3nfs_bytes_in", proto="nfs", op=w, **tl) == 64 << 10
    assert delta("s3nfs_bytes_out", proto="nfs", op=w, **tl) == 0
    assert delta("s3nfs_bytes_out", proto="nfs", op=r, **tl) == 64 << 10
    assert delta("s3nfs_bytes_in", proto="nfs", op=r, **tl) == 0
    assert delta("s3nfs_bytes_in", proto="nfs", op=lk, **tl) == 0
    assert delta("s3nfs_bytes_out", proto="nfs", op=lk, **tl) == 0
    assert delta("s3nfs_op_errors", proto="nfs", op=lk, **tl) >= 1
    check_histogram(after, proto="nfs", op=w, **tl)
    # usage and quota gauges of the tenant match the API
    u = adm.get(f"/tenants/{t.id}/usage")
    assert total(after, "s3nfs_tenant_bytes", **tl) == u["bytes"] == 3 * len(body) + (64 << 10)
    assert total(after, "s3nfs_tenant_inodes", **tl) == u["inodes"]
    assert total(after, "s3nfs_tenant_bytes_limit", **tl) == 50 << 20
    assert total(after, "s3nfs_tenant_inodes_limit", **tl) == 500
    assert samples(after, "s3nfs_tenant_bytes", **tl)[0].labels["name"] == "metrics-t"
    # the other tenant saw none of it
    assert total(after, "s3nfs_ops", "_total", tenant=other.id) == other_before
    # the store wrote at least what was acknowledged
    assert total(after, "s3nfs_store_written_bytes_total") >= \
        total(before, "s3nfs_store_written_bytes_total")
    # ... in extent writes through the page cache or O_DIRECT (3 PUTs of 100 KiB at least);
    # writes that zeroed their range first are some of the cached ones
    writes = delta("s3nfs_store_writes", path="cached") + delta("s3nfs_store_writes", path="direct")
    assert writes >= 3
    assert 0 <= delta("s3nfs_store_writes", path="cached_zeroed") <= \
        delta("s3nfs_store_writes", path="cached")


def test_admin_api_counted(d):
    before = scrape(d)
    Admin(d).get("/tenants")
    Admin(d, auth=False).raw("GET", "/tenants")
    after = scrape(d)
    d_ops = total(after, "s3nfs_ops", "_total", proto="admin") - \
        total(before, "s3nfs_ops", "_total", proto="admin")
    d_err = total(after, "s3nfs_op_errors", "_total", proto="admin") - \
        total(before, "s3nfs_op_errors", "_total", proto="admin")
    assert d_ops >= 2 and d_err >= 1


def test_per_bucket_series_move_independently(d):
    """S3 and NFS traffic to two buckets of one tenant: each bucket's operation
    series (s3nfs_bucket_*{proto, op, tenant, bucket}) counts exactly its own
    calls, bytes and errors; the tenant series count both; the per-bucket usage
    and quota gauges follow each bucket."""
    adm = Admin(d)
    t = make_tenant(adm, "metrics-b", clients=["127.0.0.1/32"], export_path="/metrics-b")
    s3 = s3_for(d, t)
    s3.create_bucket(Bucket="pb-one")
    s3.create_bucket(Bucket="pb-two")
    before = scrape(d)
    one = {"tenant": t.id, "bucket": "pb-one"}
    two = {"tenant": t.id, "bucket": "pb-two"}

    a, b = os.urandom(30 << 10), os.urandom(70 << 10)
    for i in range(2):
        s3.put_object(Bucket="pb-one", Key=f"o{i}", Body=a)
    s3.put_object(Bucket="pb-two", Key="t0", Body=b)
    assert s3.get_object(Bucket="pb-two", Key="t0")["Body"].read() == b
    with pytest.raises(ClientError):
        s3.get_object(Bucket="pb-two", Key="missing")
    with Nfs(d) as c:
        st, root = c.mount("/metrics-b")
        assert st == 0
        st, h1 = c.lookup(root, "pb-one")
        assert st == 0
        st, h2 = c.lookup(root, "pb-two")
        assert st == 0
        st, fh = c.create(h2, "nfsfile")
        assert st == 0
        st, _ = c.write_all(fh, b"w" * (48 << 10))
        assert st == 0
        assert c.read_all(fh) == b"w" * (48 << 10)
        assert c.lookup(h1, "missing")[0] != 0
        assert c.lookup(h1, "missing-too")[0] != 0
    adm.put(f"/tenants/{t.id}/buckets/pb-two/quota", {"bytes_limit": 10 << 20,
                                                     "inodes_limit": 100})
    after = scrape(d)

    def delta(family, suffix="_total", **labels):
        return total(after, family, suffix, **labels) - total(before, family, suffix, **labels)

    for f, typ in (("s3nfs_bucket_ops", "counter"), ("s3nfs_bucket_op_errors", "counter"),
                   ("s3nfs_bucket_bytes_in", "counter"), ("s3nfs_bucket_bytes_out", "counter"),
                   ("s3nfs_bucket_op_latency_seconds", "histogram"),
                   ("s3nfs_bucket_bytes", "gauge"), ("s3nfs_bucket_inodes", "gauge"),
                   ("s3nfs_bucket_bytes_limit", "gauge"), ("s3nfs_bucket_inodes_limit", "gauge")):
        assert f in after and after[f].type == typ, f
    for s in samples(after, "s3nfs_bucket_ops", "_total"):
        assert set(s.labels) == {"proto", "op", "tenant", "bucket"}

    s3ops = by_op(after, "s3nfs_bucket_ops", "_total", proto="s3", **one)
    put = find_op(s3ops, "putobject")
    get = find_op(by_op(after, "s3nfs_bucket_ops", "_total", proto="s3", **two), "getobject")
    # S3, per bucket: its own PUTs, bytes, GETs and errors only
    assert delta("s3nfs_bucket_ops", proto="s3", op=put, **one) == 2
    assert delta("s3nfs_bucket_ops", proto="s3", op=put, **two) == 1
    assert delta("s3nfs_bucket_bytes_in", proto="s3", op=put, **one) == 2 * len(a)
    assert delta("s3nfs_bucket_bytes_in", proto="s3", op=put, **two) == len(b)
    assert delta("s3nfs_bucket_ops", proto="s3", op=get, **two) == 2
    assert delta("s3nfs_bucket_ops", proto="s3", op=get, **one) == 0
    assert delta("s3nfs_bucket_op_errors", proto="s3", op=get, **two) == 1
    assert delta("s3nfs_bucket_op_errors", proto="s3", op=put, **one) == 0
    assert delta("s3nfs_bucket_bytes_out", proto="s3", op=get, **two) >= len(b)
    assert delta("s3nfs_bucket_bytes_out", proto="s3", **one) == 0
    check_histogram(after, "s3nfs_bucket_op_latency_seconds", proto="s3", op=put, **one)
    assert delta("s3nfs_bucket_op_latency_seconds", "_count", proto="s3", op=put, **one) == 2
    assert delta("s3nfs_bucket_op_latency_seconds", "_count", proto="s3", op=put, **two) == 1
    # NFS, per bucket of the call's file handle
    nfsops = by_op(after, "s3nfs_bucket_ops", "_total", proto="nfs", **two)
    w, r = find_op(nfsops, "write"), find_op(nfsops, "read")
    lk = find_op(by_op(after, "s3nfs_bucket_ops", "_total", proto="nfs", **one), "lookup")
    assert delta("s3nfs_bucket_bytes_in", proto="nfs", op=w, **two) == 48 << 10
    assert delta("s3nfs_bucket_bytes_out", proto="nfs", op=r, **two) == 48 << 10
    assert delta("s3nfs_bucket_ops", proto="nfs", op=w, **one) == 0
    assert delta("s3nfs_bucket_bytes_in", proto="nfs", **one) == 0
    assert delta("s3nfs_bucket_op_errors", proto="nfs", op=lk, **one) == 2
    assert delta("s3nfs_bucket_op_errors", proto="nfs", op=lk, **two) == 0
    check_histogram(after, "s3nfs_bucket_op_latency_seconds", proto="nfs", op=w, **two)
    # the tenant series count both buckets
    tl = {"tenant": t.id}
    assert delta("s3nfs_ops", proto="s3", op=put, **tl) == 3
    assert delta("s3nfs_bytes_in", proto="s3", op=put, **tl) == 2 * len(a) + len(b)
    # usage and quota gauges per bucket, as the API reports them
    for name, lbl in (("pb-one", one), ("pb-two", two)):
        u = adm.get(f"/tenants/{t.id}/buckets/{name}/quota")
        assert total(after, "s3nfs_bucket_bytes", **lbl) == u["bytes"]
        assert total(after, "s3nfs_bucket_inodes", **lbl) == u["inodes"]
    assert total(after, "s3nfs_bucket_bytes", **one) == 2 * len(a)
    assert total(after, "s3nfs_bucket_bytes", **two) == len(b) + (48 << 10)
    assert total(after, "s3nfs_bucket_bytes_limit", **two) == 10 << 20
    assert total(after, "s3nfs_bucket_inodes_limit", **two) == 100
    assert total(after, "s3nfs_bucket_bytes_limit", **one) == 0
    # a deleted bucket's series and gauges go
    for i in range(2):
        s3.delete_object(Bucket="pb-one", Key=f"o{i}")
    s3.delete_bucket(Bucket="pb-one")
    gone = scrape(d)
    assert not samples(gone, "s3nfs_bucket_ops", "_total", **one)
    assert not samples(gone, "s3nfs_bucket_bytes", **one)
    assert samples(gone, "s3nfs_bucket_ops", "_total", **two)
