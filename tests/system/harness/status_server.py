"""Requests to a daemon's status server (GET /status, /metrics) on its Unix socket or over TCP."""

import json
import socket

from .basics import TestFailure


def parse_http(data):
    """(status code, headers dict with lowercase names, body text) of a whole HTTP answer."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    code = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return code, headers, body.decode("utf-8", errors="replace")


def _exchange(s, request):
    s.sendall(request)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def _request(method, path):
    return ("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (method, path)).encode()


def http_unix(sock_path, path, method="GET", timeout=10.0, raw=None):
    """(status code, headers, body text) of one request on a Unix socket; @raw: the bytes to
    send instead of a request for @path."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        data = _exchange(s, raw if raw is not None else _request(method, path))
    finally:
        s.close()
    return parse_http(data)


def http_tcp(addr, path, timeout=10.0):
    """(status code, headers, body text) of GET @path at @addr ("host:port", "[v6]:port")."""
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as s:
        return parse_http(_exchange(s, _request("GET", path)))


def http_get(sock_path, path, timeout):
    """GET @path on a Unix socket; returns (status code, body text), code 0 when the answer is
    not HTTP (e.g. the connection closed first)."""
    try:
        code, _, body = http_unix(sock_path, path, timeout=timeout)
    except (IndexError, ValueError):
        return 0, ""
    return code, body


def status_json(sock_path):
    """The /status document of the status socket @sock_path."""
    code, _, body = http_unix(sock_path, "/status")
    if code != 200:
        raise TestFailure("GET /status on %s: %d %s" % (sock_path, code, body))
    return json.loads(body)
