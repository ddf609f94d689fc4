"""Container healthcheck for `web`: GET /healthz with a Host header Django accepts; exit 0 if 200."""

import os
import sys
import urllib.error
import urllib.request

# ALLOWED_HOSTS rejects "127.0.0.1" in production, so present the first configured host name.
allowed = [host.strip() for host in os.environ.get("ALLOWED_HOSTS", "").split(",") if host.strip()]
host = allowed[0].lstrip(".") if allowed and allowed[0] != "*" else "localhost"
request = urllib.request.Request(
    os.environ.get("HEALTHCHECK_URL", "http://127.0.0.1:8000/healthz"),
    headers={"Host": host, "X-Forwarded-Proto": "https"},
)
try:
    with urllib.request.urlopen(request, timeout=4) as response:
        sys.exit(0 if response.status == 200 else 1)
except (urllib.error.URLError, OSError) as exc:
    print(f"healthcheck failed: {exc}", file=sys.stderr)
    sys.exit(1)
