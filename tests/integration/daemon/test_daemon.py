# SPDX-License-Identifier: Apache-2.0
"""The daemon itself: banner and credentials, /healthz and /metrics, the admin
REST API with its bearer token (a new tenant's key works over S3 and sees only
its own buckets), SIGHUP reload, SIGTERM exit status, --check-config and
config errors with line numbers, --daemon with a pidfile; starts that fail
(busy port, bad TLS file) before creating anything, --reset-admin, and the
sd_notify readiness protocol."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

# As in tests/integration/conftest.py (not imported: other folders have a conftest too).
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.environ.get("S3NFSD_BIN", os.path.join(TOP, "build", "s3nfsd"))
CTL = os.environ.get("S3NFSCTL_BIN", os.path.join(TOP, "build", "s3nfsctl"))


def api(d, method, path, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(d.admin_endpoint + "/api/v1" + path, data=data, method=method)
    if token is not False:
        req.add_header("Authorization", "Bearer " + (token or d.admin_token))
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, (json.loads(raw) if raw else None)


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def wait_for_log(d, pattern, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(d.log_path, "rb") as f:
            if re.search(pattern, f.read().decode(errors="replace")):
                return True
        time.sleep(0.05)
    return False


def test_banner_health_metrics(s3nfsd):
    d = s3nfsd
    assert wait_for_log(d, r"s3nfsd \S+ ready")
    log = open(d.log_path).read()
    assert f"access key:  {d.access_key}" in log
    assert f"aws --endpoint-url http://127.0.0.1:{d.s3_port} s3 ls" in log
    p = d.nfs_port
    # a runnable command (libnfs-utils), not a bare URL
    assert f"  nfs-ls 'nfs://127.0.0.1/?version=3&nfsport={p}&mountport={p}'\n" in log
    assert f"mount -t nfs -o vers=3,proto=tcp,port={p},mountport={p},nolock 127.0.0.1:/ /mnt" \
        in log
    # secrets given through the environment are never echoed
    assert d.secret_key not in log and d.admin_token not in log
    assert "secret key:  (from the environment, S3NFS_SECRET_KEY)" in log
    assert "admin token: (from the environment, S3NFS_ADMIN_TOKEN)" in log
    assert 'AWS_SECRET_ACCESS_KEY="$S3NFS_SECRET_KEY"' in log
    assert get(d.admin_endpoint + "/healthz") == (200, "ok\n")
    d.boto3().list_buckets()
    # A request is counted when the server finishes it, once its answer is
    # written, which can be just after the client has read that answer: allow
    # the loop a moment.
    ops = r's3nfs_ops_total\{proto="s3",op="\w+",tenant="1"\} [1-9]'
    deadline = time.monotonic() + 5
    while True:
        status, text = get(d.admin_endpoint + "/metrics")
        assert status == 200
        if re.search(ops, text) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert "# TYPE s3nfs_op_latency_seconds histogram" in text
    assert re.search(ops, text)
    assert "s3nfs_store_capacity_bytes" in text


def test_admin_api_and_tenant_isolation(s3nfsd):
    d = s3nfsd
    assert api(d, "GET", "/tenants", token=False)[0] == 401
    assert api(d, "GET", "/tenants", token="nope")[0] == 403
    st, tenants = api(d, "GET", "/tenants")
    assert st == 200 and [t["name"] for t in tenants] == ["default"]
    d.boto3().create_bucket(Bucket="default-only")

    st, t = api(d, "POST", "/tenants", {"name": "acme"})
    assert st == 201
    assert api(d, "POST", "/tenants", {"name": "acme"})[0] == 409
    assert api(d, "POST", "/tenants", {"name": "bad name"})[0] == 400
    st, u = api(d, "POST", f"/tenants/{t['id']}/users", {"name": "alice", "uid": 1000,
                                                          "gid": 1000})
    assert st == 201
    st, k = api(d, "POST", f"/tenants/{t['id']}/users/{u['id']}/keys")
    assert st == 201 and k["secret_key"]
    st, keys = api(d, "GET", f"/tenants/{t['id']}/keys")
    assert [x["access_key"] for x in keys] == [k["access_key"]]
    assert k["secret_key"] not in json.dumps(keys)

    s3 = d.boto3(access_key=k["access_key"], secret_key=k["secret_key"])
    assert s3.list_buckets()["Buckets"] == []  # the default tenant's bucket is not visible
    s3.create_bucket(Bucket="acme-data")
    s3.put_object(Bucket="acme-data", Key="k", Body=b"x")
    names = [b["Name"] for b in d.boto3().list_buckets()["Buckets"]]
    assert "acme-data" not in names and "default-only" in names

    # A disabled key stops working at once.
    st, _ = api(d, "PATCH", f"/keys/{k['access_key']}", {"disabled": True})
    assert st == 200
    with pytest.raises(Exception):
        s3.list_buckets()
    # A tenant holding a bucket cannot be deleted.
    assert api(d, "DELETE", f"/tenants/{t['id']}")[0] == 409


def test_sighup_reload_and_sigterm(daemon_factory, tmp_path):
    conf = tmp_path / "s3nfs.conf"
    conf.write_text("log_level = info\n")
    d = daemon_factory(["--config", str(conf)]).start()
    conf.write_text("# now louder\nlog_level = debug,s3=warn\ns3_max_conns = 5\n")
    d.proc.send_signal(signal.SIGHUP)
    assert wait_for_log(d, r"reload: log_level changed from 'info' to 'debug,s3=warn'")
    assert wait_for_log(d, r"reload: s3_max_conns changed .* needs a restart")
    # A broken file on reload keeps the running configuration.
    conf.write_text("log_level = loud\n")
    d.proc.send_signal(signal.SIGHUP)
    assert wait_for_log(d, r"reload failed, keeping the running configuration: .*:1: bad value")
    assert get(d.admin_endpoint + "/healthz")[0] == 200
    assert d.stop() == 0
    assert wait_for_log(d, r"s3nfsd stopped")


def test_check_config_and_errors(tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text("# ok\ns3_listen = 127.0.0.1:9000\nno_such_option = 1\n")
    r = subprocess.run([BIN, "--config", str(bad)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert f"{bad}:3: unknown option 'no_such_option'" in r.stderr
    good = tmp_path / "good.conf"
    good.write_text("s3_max_conns = 77\n")
    r = subprocess.run([BIN, "--config", str(good), "--check-config", "--set", "map_size=1GiB"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert "s3_max_conns = 77\n" in r.stdout and "map_size = 1GiB\n" in r.stdout
    r = subprocess.run([BIN, "--bogus"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown option '--bogus'" in r.stderr
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "--check-config" in r.stdout and "qos_max_wait_ms" in r.stdout


def test_generated_credentials_shown_once(daemon_factory):
    d = daemon_factory(env={"S3NFS_ACCESS_KEY": "", "S3NFS_SECRET_KEY": "",
                            "S3NFS_ADMIN_TOKEN": ""}).start()
    log = open(d.log_path).read()
    ak = re.search(r"access key:  (\S+)", log).group(1)
    sk = re.search(r"secret key:  (\S+)", log).group(1)
    token = re.search(r"admin token: (\S+)", log).group(1)
    d.boto3(access_key=ak, secret_key=sk).list_buckets()
    assert api(d, "GET", "/tenants", token=token)[0] == 200
    assert api(d, "GET", "/tenants", token=d.admin_token)[0] == 403  # a wrong token
    d.stop()
    size = os.path.getsize(d.log_path)
    d.start()
    tail = open(d.log_path).read()[size:]
    assert "secret key:" not in tail and "admin token:" not in tail
    d.boto3(access_key=ak, secret_key=sk).list_buckets()  # same key after restart
    assert api(d, "GET", "/tenants", token=token)[0] == 200
    assert oct(os.stat(os.path.join(d.data_dir, "master.key")).st_mode & 0o777) == "0o600"


def test_daemon_mode_and_pidfile(daemon_factory, tmp_path):
    d = daemon_factory()
    pidfile = tmp_path / "s3nfsd.pid"
    env = dict(os.environ, S3NFS_ACCESS_KEY=d.access_key, S3NFS_SECRET_KEY=d.secret_key,
               S3NFS_ADMIN_TOKEN=d.admin_token)
    args = [BIN, "--daemon", "--pidfile", str(pidfile), "--data-dir", d.data_dir,
            "--s3-listen", f"127.0.0.1:{d.s3_port}", "--nfs-listen", f"127.0.0.1:{d.nfs_port}",
            "--admin-listen", f"127.0.0.1:{d.admin_port}", "--set", "data_file_size=64MiB"]
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ready" in r.stdout  # the parent returns once the daemon serves
    pid = int(pidfile.read_text())
    try:
        assert get(d.admin_endpoint + "/healthz") == (200, "ok\n")
        # A second daemon on the same pidfile refuses to start.
        r2 = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert r2.returncode != 0
        assert os.path.exists(os.path.join(d.data_dir, "s3nfsd.log"))
    finally:
        os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 30
    while time.time() < deadline and pidfile.exists():
        time.sleep(0.05)
    assert not pidfile.exists()


def ctl(d, *args, token=True):
    env = dict(os.environ, S3NFS_ADMIN=f"127.0.0.1:{d.admin_port}",
               S3NFS_ADMIN_TOKEN=d.admin_token if token else "")
    return subprocess.run([CTL, "--json", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_s3nfsctl(s3nfsd):
    if not os.access(CTL, os.X_OK):
        pytest.fail(f"s3nfsctl not found at {CTL}")
    d = s3nfsd
    r = ctl(d, "health")
    assert r.returncode == 0 and r.stdout == "ok\n"
    r = ctl(d, "tenant", "list", token=False)
    assert r.returncode == 2 and "needs a token" in r.stderr
    r = ctl(d, "tenant", "create", "ctl-t")
    assert r.returncode == 0, r.stderr
    tid = json.loads(r.stdout)["id"]
    r = ctl(d, "user", "create", "ctl-t", "bob", "--uid", "1234", "--gid", "1234")
    assert r.returncode == 0, r.stderr
    uid = json.loads(r.stdout)["id"]
    r = ctl(d, "key", "create", "ctl-t", str(uid))
    assert r.returncode == 0, r.stderr
    k = json.loads(r.stdout)
    s3 = d.boto3(access_key=k["access_key"], secret_key=k["secret_key"])
    s3.create_bucket(Bucket="ctl-bucket")
    r = ctl(d, "quota", "set", str(tid), "--bytes", "1M", "--inodes", "100")
    assert r.returncode == 0 and json.loads(r.stdout)["bytes_limit"] == 1 << 20
    r = ctl(d, "qos", "set", "ctl-t", "--user", str(uid), "--write-bps", "10M")
    assert r.returncode == 0 and json.loads(r.stdout)["write_bps"] == 10 << 20
    r = ctl(d, "usage", "ctl-t", "ctl-bucket")
    assert r.returncode == 0 and "inodes" in json.loads(r.stdout)
    r = ctl(d, "tenant", "delete", "ctl-t")
    assert r.returncode == 1 and "409" in r.stderr
    r = ctl(d, "tenant", "get", "no-such-tenant")
    assert r.returncode == 1
    r = ctl(d, "user", "frobnicate")
    assert r.returncode == 2


def bare_args(data_dir, s3, nfs, admin, *extra):
    return [BIN, "--foreground", "--data-dir", str(data_dir), "--s3-listen", f"127.0.0.1:{s3}",
            "--nfs-listen", f"127.0.0.1:{nfs}", "--admin-listen", f"127.0.0.1:{admin}",
            "--set", "data_file_size=64MiB", *extra]


NO_ENV_CREDS = {"S3NFS_ACCESS_KEY": "", "S3NFS_SECRET_KEY": "", "S3NFS_ADMIN_TOKEN": ""}


@pytest.mark.parametrize("busy", ["s3", "nfs", "admin"])
def test_busy_port_fails_before_creating_anything(tmp_path, busy):
    """A listener that cannot bind fails the start with the address in the
    message, before the data folder, store or credentials exist; once the port
    is free, the first start prints the credentials it generates."""
    sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
    from s3nfsd_harness import free_port
    ports = {"s3": free_port(), "nfs": free_port(), "admin": free_port()}
    data = tmp_path / "data"
    holder = socket.socket()
    holder.bind(("127.0.0.1", ports[busy]))
    holder.listen()
    env = dict(os.environ, **NO_ENV_CREDS)
    args = bare_args(data, ports["s3"], ports["nfs"], ports["admin"])
    try:
        r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    finally:
        holder.close()
    assert r.returncode == 1
    assert (f"cannot start the {busy.upper() if busy != 'admin' else 'admin'} listener: "
            f"127.0.0.1:{ports[busy]}: address already in use") in r.stderr, r.stderr
    assert not data.exists()
    assert "secret key" not in r.stdout
    # the port is free again: this start is the first, and shows what it made
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    try:
        out = ""
        for line in p.stdout:
            out += line
            if line.startswith("Try:"):
                break
        assert re.search(r"secret key:  \S+   \(shown once\)", out), out
        assert re.search(r"admin token: \S+   \(shown once", out), out
    finally:
        p.terminate()
        p.wait(30)


def test_bad_tls_files_fail_before_creating_anything(tmp_path):
    sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
    from s3nfsd_harness import free_port
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    bad = tmp_path / "bad-key.pem"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    data = tmp_path / "data"
    env = dict(os.environ, **NO_ENV_CREDS)
    cases = [
        (["--set", f"s3_tls_cert={cert}", "--set", f"s3_tls_key={bad}"],
         f"S3 listener: TLS key {bad} is not a usable PEM private key"),
        (["--set", f"admin_tls_cert={tmp_path}/missing.pem", "--set", f"admin_tls_key={key}"],
         f"admin listener: cannot read TLS certificate {tmp_path}/missing.pem: No such file"),
    ]
    for extra, msg in cases:
        args = bare_args(data, free_port(), free_port(), free_port(), *extra)
        r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and msg in r.stderr, r.stderr
        assert not data.exists()
    # a certificate without its key is a configuration error (exit 2)
    r = subprocess.run(bare_args(data, 1, 2, 3, "--set", f"admin_tls_cert={cert}"), env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "admin_tls_cert is set but admin_tls_key is not" in r.stderr


def test_reset_admin(daemon_factory, tmp_path):
    """--reset-admin refuses while the daemon runs; stopped, it prints a new
    admin token (the old one stops working) and a new key of the bootstrap
    admin (the old key keeps working)."""
    pidfile = tmp_path / "s3nfsd.pid"
    d = daemon_factory(["--pidfile", str(pidfile)], env=NO_ENV_CREDS).start()
    log = open(d.log_path).read()
    old_ak = re.search(r"access key:  (\S+)", log).group(1)
    old_sk = re.search(r"secret key:  (\S+)", log).group(1)
    old_token = re.search(r"admin token: (\S+)", log).group(1)
    reset = [BIN, "--data-dir", d.data_dir, "--pidfile", str(pidfile), "--reset-admin"]
    env = dict(os.environ, **NO_ENV_CREDS)
    r = subprocess.run(reset, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert f"the daemon is running (pidfile {pidfile} is locked by pid {d.proc.pid})" in r.stderr
    # without the pidfile, the data folder's lock says the same
    r = subprocess.run(reset[:3] + ["--reset-admin"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and f"is in use by another s3nfsd (pid {d.proc.pid})" in r.stderr
    d.stop()

    r = subprocess.run(reset, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    token = re.search(r"admin token: (\S+)", r.stdout).group(1)
    ak = re.search(r"access key:  (\S+)", r.stdout).group(1)
    sk = re.search(r"secret key:  (\S+)", r.stdout).group(1)
    assert token != old_token and ak != old_ak
    size = os.path.getsize(d.log_path)
    d.start()
    tail = open(d.log_path).read()[size:]
    assert token not in tail and sk not in tail and "admin token:" not in tail
    assert "lost? s3nfsd --reset-admin" in tail
    assert api(d, "GET", "/tenants", token=old_token)[0] == 403
    st, who = api(d, "GET", "/whoami", token=token)
    assert st == 200 and who["system_admin"] is True
    d.boto3(access_key=ak, secret_key=sk).list_buckets()
    d.boto3(access_key=old_ak, secret_key=old_sk).list_buckets()
    d.stop()
    # nothing to reset where there is no store
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run([BIN, "--data-dir", str(empty), "--reset-admin"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no store in" in r.stderr
    assert os.listdir(empty) == []


@pytest.mark.parametrize("abstract", [False, True])
def test_sd_notify(daemon_factory, tmp_path, abstract):
    """Type=notify: READY=1 once every listener serves, RELOADING=1 then
    READY=1 around a SIGHUP reload, STOPPING=1 on SIGTERM; NOTIFY_SOCKET may
    be a path or an abstract name ('@...')."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = f"@s3nfs-test-notify-{os.getpid()}-{time.time_ns()}"
        sock.bind("\0" + name[1:])
    else:
        name = str(tmp_path / "notify.sock")
        sock.bind(name)
    sock.settimeout(30)
    try:
        d = daemon_factory(env={"NOTIFY_SOCKET": name}).start()

        def next_msg():
            return sock.recv(4096).decode()
        m = next_msg()
        assert m.startswith("READY=1\n") and f"MAINPID={d.proc.pid}" in m, m
        d.proc.send_signal(signal.SIGHUP)
        m = next_msg()
        assert m.startswith("RELOADING=1\n") and re.search(r"MONOTONIC_USEC=\d+", m), m
        assert next_msg().startswith("READY=1")
        d.proc.send_signal(signal.SIGTERM)
        assert next_msg().startswith("STOPPING=1")
        assert d.stop() == 0
    finally:
        sock.close()


def test_make_install_and_unit(tmp_path):
    """make install DESTDIR=... puts both programs, the systemd unit (Type=notify,
    the pidfile, SIGHUP reload, restart on failure), a first configuration that
    the daemon accepts, and the docs where they belong."""
    build = os.environ.get("S3NFS_BUILD", os.path.join(TOP, "build"))
    if not os.path.exists(os.path.join(build, "Makefile")):
        pytest.skip(f"no configured build tree at {build}")
    dest = tmp_path / "root"
    r = subprocess.run(["make", "-C", build, "install", f"DESTDIR={dest}"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    prefix = re.search(r"^prefix = (.*)$", open(os.path.join(build, "Makefile")).read(),
                       re.M).group(1)
    root = str(dest) + prefix
    for f in ("bin/s3nfsd", "bin/s3nfsctl"):
        assert os.access(os.path.join(root, f), os.X_OK), f
    unit = open(os.path.join(root, "lib/systemd/system/s3nfsd.service")).read()
    for line in ("Type=notify", f"ExecStart={prefix}/bin/s3nfsd --foreground --config "
                 f"{prefix}/etc/s3nfs/s3nfsd.conf --pidfile /run/s3nfsd/s3nfsd.pid",
                 "PIDFile=/run/s3nfsd/s3nfsd.pid", "ExecReload=/bin/kill -HUP $MAINPID",
                 "Restart=on-failure", "NoNewPrivileges=yes", "WantedBy=multi-user.target"):
        assert "\n" + line in unit, line
    assert "@" + "bindir@" not in unit and "@" + "sysconfdir@" not in unit
    conf = os.path.join(root, "etc/s3nfs/s3nfsd.conf")
    r = subprocess.run([BIN, "--config", conf, "--check-config"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "data_dir = /var/lib/s3nfs" in r.stdout, r.stderr
    for doc in ("README.md", "operations.md", "configuration.md", "admin-api.md"):
        assert os.path.exists(os.path.join(root, "share/doc/s3nfs", doc)), doc
    # a second install keeps an edited configuration
    with open(conf, "a") as f:
        f.write("log_level = debug\n")
    r = subprocess.run(["make", "-C", build, "install", f"DESTDIR={dest}"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "log_level = debug" in open(conf).read()


def test_check_store(daemon_factory, tmp_path):
    """--check-store refuses while the daemon runs; stopped, it passes on a store with
    objects, versions and a pending multipart upload, and fails where there is no
    store (docs/operations.md, "Checking a store")."""
    d = daemon_factory().start()
    s3 = d.boto3()
    s3.create_bucket(Bucket="chk")
    s3.put_bucket_versioning(Bucket="chk", VersioningConfiguration={"Status": "Enabled"})
    for i in range(3):
        s3.put_object(Bucket="chk", Key="k", Body=b"x" * (i * 5000))
    s3.delete_object(Bucket="chk", Key="k")
    up = s3.create_multipart_upload(Bucket="chk", Key="m")["UploadId"]
    s3.upload_part(Bucket="chk", Key="m", UploadId=up, PartNumber=1, Body=b"p" * 9000)
    check = [BIN, "--data-dir", d.data_dir, "--set",
             f"data_file_size={os.environ.get('S3NFS_TEST_DATA_FILE_SIZE', '2GiB')}",
             "--check-store"]
    r = subprocess.run(check, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and f"is in use by another s3nfsd (pid {d.proc.pid})" in r.stderr
    d.stop()
    r = subprocess.run(check, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "store check: consistent" in r.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run([BIN, "--data-dir", str(empty), "--check-store"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "no store in" in r.stderr
