# SPDX-License-Identifier: Apache-2.0
"""Helpers of the tenant tests: an admin REST client (bearer token or SigV4 with
an admin user's access key), tenant setup (tenant, user, key, export), and NFS
over the NFS front end's raw client (tests/integration/nfs/rpc3.py) bound to a
chosen loopback source address, so one machine can play clients of different
address ranges (127.0.0.2 vs 127.0.0.3)."""
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "nfs"))
import rpc3  # noqa: E402
from rpc3 import Packer  # noqa: E402
from s3nfsd_harness import CTL  # noqa: E402,F401

NFS3ERR_DQUOT = 69
NFS3ERR_NOSPC = 28
MNT3ERR_ACCES, MNT3ERR_NOENT = 13, 2
UNSTABLE, DATA_SYNC, FILE_SYNC = 0, 1, 2


class ApiError(Exception):
    pass


class Admin:
    """The admin REST API. auth: None (no credentials), ("token", T) or
    ("sigv4", access_key, secret_key)."""

    def __init__(self, d, auth=None):
        self.d = d
        self.auth = ("token", d.admin_token) if auth is None else auth

    def raw(self, method, path, body=None, headers=None, data=None):
        url = self.d.admin_endpoint + "/api/v1" + path
        if data is None and body is not None:
            data = json.dumps(body).encode()
        hdrs = dict(headers or {})
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        if self.auth and self.auth[0] == "token":
            hdrs["Authorization"] = "Bearer " + self.auth[1]
        elif self.auth and self.auth[0] == "sigv4":
            hdrs = sign(method, url, data or b"", hdrs, self.auth[1], self.auth[2])
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        try:
            # an HTTPS admin listener of a test has a self-signed certificate
            ctx = ssl._create_unverified_context() if getattr(self.d, "admin_tls", False) \
                else None
            with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None), dict(r.headers)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                js = json.loads(raw) if raw else None
            except ValueError:
                js = {"unparsed": raw.decode(errors="replace")}
            return e.code, js, dict(e.headers)

    def call(self, method, path, body=None, want=None):
        st, js, _ = self.raw(method, path, body)
        if want is not None and st != want:
            raise ApiError(f"{method} {path} -> {st} {js} (wanted {want})")
        return st, js

    def get(self, path):
        return self.call("GET", path, want=200)[1]

    def post(self, path, body=None):
        return self.call("POST", path, body or {}, want=201)[1]

    def put(self, path, body):
        return self.call("PUT", path, body, want=200)[1]

    def patch(self, path, body):
        return self.call("PATCH", path, body, want=200)[1]

    def delete(self, path):
        return self.call("DELETE", path, want=204)[1]


def sign(method, url, data, headers, akey, secret, service="s3nfs-admin", region="us-east-1"):
    """Headers of @url signed with SigV4 (botocore's signer, S3 style paths)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    req = AWSRequest(method=method, url=url, data=data, headers=headers)
    S3SigV4Auth(Credentials(akey, secret), service, region).add_auth(req)
    return dict(req.headers.items())


def make_tenant(adm, name, clients=None, export_path=None, tenant_admin=False, uid=1000):
    """A tenant with one user and key (and an NFS export when clients is given)."""
    t = adm.post("/tenants", {"name": name})
    u = adm.post(f"/tenants/{t['id']}/users", {"name": f"{name}-user", "uid": uid, "gid": uid,
                                               "tenant_admin": tenant_admin})
    k = adm.post(f"/tenants/{t['id']}/users/{u['id']}/keys")
    e = None
    if clients:
        e = adm.post(f"/tenants/{t['id']}/exports",
                     {"path": export_path or f"/{name}", "clients": clients})
    return SimpleNamespace(id=t["id"], name=name, root=t["root"], user=u, uid=u["id"],
                           akey=k["access_key"], secret=k["secret_key"], export=e)


def s3_for(d, t):
    return d.boto3(access_key=t.akey, secret_key=t.secret)


def s3_code(exc):
    """(HTTP status, S3 error code) of a botocore ClientError."""
    r = exc.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]


class Nfs(rpc3.RpcConn):
    """rpc3.RpcConn plus REMOVE and a few path helpers; source = client address."""

    def __init__(self, d, source="127.0.0.1", uid=0, gid=0, timeout=20):
        super().__init__(d.nfs_port, source=source, cred=rpc3.auth_sys(uid, gid),
                         timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def remove(self, dfh, name):
        st, _ = self.nfs(rpc3.REMOVE, Packer().opaque(dfh).string(name).bytes())
        return st

    def rename(self, from_dfh, from_name, to_dfh, to_name):
        """NFSv3 RENAME (procedure 14): its status."""
        st, _ = self.nfs(14, Packer().opaque(from_dfh).string(from_name)
                         .opaque(to_dfh).string(to_name).bytes())
        return st

    def fileid(self, fh):
        st, a = self.getattr(fh)
        assert st == 0, st
        return a["fileid"]

    def mount(self, path):
        st, res = self.mnt(path)
        return st, (res[0] if res else None)

    def write_all(self, fh, data, off=0, stable=FILE_SYNC, chunk=1 << 16):
        pos = 0
        while pos < len(data):
            st, r = self.write(fh, off + pos, data[pos:pos + chunk], stable)
            if st != 0:
                return st, pos
            pos += r["count"]
        return 0, pos

    def read_all(self, fh, chunk=1 << 16):
        out, off = b"", 0
        while True:
            st, r = self.read(fh, off, chunk)
            assert st == 0, st
            data, eof, _ = r
            out += data
            off += len(data)
            if eof or not data:
                return out
