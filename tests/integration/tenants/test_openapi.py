# SPDX-License-Identifier: Apache-2.0
"""docs/openapi.yaml and routes[] in admin/admin_api.c describe the same API:
the same paths, the same methods, the same system-admin-only methods; every
$ref resolves; and a live daemon answers every documented operation (no 405,
no "no such resource")."""
import os
import re
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenutil import Admin  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
METHODS = {"M_GET": "get", "M_POST": "post", "M_PUT": "put", "M_PATCH": "patch",
           "M_DELETE": "delete"}


def code_routes():
    src = open(os.path.join(TOP, "admin", "admin_api.c")).read()
    table = src[src.index("static const struct route routes[]"):]
    table = table[:table.index("};")]
    out = {}
    for m in re.finditer(r'ROUTE\(([^,]+),\s*([^,]+),\s*"([^"]+)"', table):
        methods = {METHODS[x.strip()] for x in m.group(1).split("|")}
        sys_only = set() if m.group(2).strip() == "0" else \
            {METHODS[x.strip()] for x in m.group(2).split("|")}
        out[m.group(3)] = (methods, sys_only)
    assert len(out) >= 15, "routes[] not found in admin_api.c"
    return out


def spec():
    with open(os.path.join(TOP, "docs", "openapi.yaml")) as f:
        return yaml.safe_load(f)


def test_spec_is_openapi3():
    s = spec()
    assert s["openapi"].startswith("3.")
    assert s["info"]["title"] and s["paths"]
    assert set(s["components"]["securitySchemes"]) == {"bearer", "sigv4"}


def test_every_route_documented_and_nothing_more():
    code, doc = code_routes(), spec()["paths"]
    assert set(code) == set(doc), (set(code) ^ set(doc))
    for path, (methods, sys_only) in code.items():
        ops = {k for k in doc[path] if k in METHODS.values()}
        assert ops == methods, (path, ops, methods)
        marked = {k for k in ops if doc[path][k].get("x-system-admin-only")}
        assert marked == sys_only, (path, marked, sys_only)
        for k in ops:
            op = doc[path][k]
            assert op.get("summary") and op.get("operationId") and op.get("responses")
        # every {param} in the path is declared
        declared = {p["$ref"].rsplit("/", 1)[1] for p in doc[path].get("parameters", [])
                    if "$ref" in p}
        for name in re.findall(r"{(\w+)}", path):
            assert name in declared, (path, name)


def test_refs_resolve_and_operation_ids_unique():
    s = spec()
    ids = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "$ref":
                    assert v.startswith("#/"), v
                    cur = s
                    for part in v[2:].split("/"):
                        assert part in cur, v
                        cur = cur[part]
                elif k == "operationId":
                    ids.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(s)
    assert len(ids) == len(set(ids))


@pytest.fixture(scope="module")
def d(s3nfsd_module):
    return s3nfsd_module


def test_live_daemon_answers_every_documented_operation(d):
    adm = Admin(d)
    values = {"tenant": "999999", "user": "999999", "export": "999999", "bucket": "nosuch",
              "akey": "S3NNOSUCHKEY0000000", "remote": "999999"}
    for path, item in spec()["paths"].items():
        url = re.sub(r"{(\w+)}", lambda m: values[m.group(1)], path)
        for method in [k for k in item if k in METHODS.values()]:
            body = {} if method in ("post", "put", "patch") else None
            st, js, _ = adm.raw(method.upper(), url, body)
            assert st != 405, (method, path)
            assert not (st == 404 and js and js.get("message") == "no such resource"), \
                (method, path)
            assert st < 500, (method, path, st, js)
    # and an undocumented method on a documented path is refused with 405
    st, js, _ = adm.raw("POST", "/tenants/1")
    assert st == 405 and js["error"] == "MethodNotAllowed"
