# SPDX-License-Identifier: Apache-2.0
"""QoS admission on the S3 path: a tenant policy set through the admin API
throttles S3 requests (503 SlowDown once the wait would exceed
qos_max_wait_ms); removing it lifts the limit."""
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from s3util import connect, read_responses, signed_request  # noqa: E402


def admin(d, method, path, body=None):
    req = urllib.request.Request(d.admin_endpoint + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {d.admin_token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def test_qos_throttles_s3(daemon_factory):
    d = daemon_factory(extra_args=["--set", "qos_max_wait_ms=50"]).start()
    s3 = d.boto3()
    s3.create_bucket(Bucket="qos-bucket")
    assert admin(d, "PUT", "/api/v1/tenants/1/qos", {"meta_iops": 1, "write_bps": 1000}) == 200
    # metadata ops: one per second; the next ones would wait ~1 s > 50 ms
    s = connect(d)
    s.sendall(b"".join(signed_request(d, "GET", "/qos-bucket")[0] for _ in range(4)))
    statuses = [r[0] for r in read_responses(s, 4)]
    assert 503 in statuses
    # bandwidth: the first write passes (debt), the next must wait far longer than 50 ms
    s.sendall(signed_request(d, "PUT", "/qos-bucket/a", body=b"x" * 200000)[0])
    s.sendall(signed_request(d, "PUT", "/qos-bucket/b", body=b"x" * 200000)[0])
    rs = read_responses(s, 2)
    assert rs[1][0] == 503 and b"SlowDown" in rs[1][2]
    s.close()
    assert admin(d, "DELETE", "/api/v1/tenants/1/qos") in (200, 204)
    s = connect(d)
    s.sendall(b"".join(signed_request(d, "GET", "/qos-bucket")[0] for _ in range(4)))
    assert [r[0] for r in read_responses(s, 4)] == [200] * 4
    s.close()
