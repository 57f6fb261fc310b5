"""CPU seconds of the embedded broker, Spark's Python workers and the driver (JVM + Python)
over one bench run: polls /proc every 0.3 s until the `geops app` process has come and gone.
Start it just before `geops bench paper ...` (one run) and it prints the totals.
"""
import os
import subprocess
import time

TCK = os.sysconf("SC_CLK_TCK")
seen: dict[str, tuple[str, float]] = {}


def scan() -> None:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode()
            if "tansu" in cmd:
                kind = "broker"
            elif "pyspark.daemon" in cmd:
                kind = "python workers"
            elif "app/main.py" in cmd:
                kind = "driver (JVM + Python)"
            else:
                continue
            with open(f"/proc/{pid}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
            seen[pid] = (kind, sum(int(x) for x in f[11:15]) / TCK)  # utime stime cutime cstime
        except (FileNotFoundError, ProcessLookupError):
            pass


app_seen = False
deadline = time.time() + 1200
while time.time() < deadline:
    scan()
    alive = subprocess.run(["pgrep", "-f", "cli.main app"], capture_output=True).stdout.strip()
    app_seen = app_seen or bool(alive)
    if app_seen and not alive:
        break
    time.sleep(0.3)
totals: dict[str, float] = {}
for kind, cpu in seen.values():
    totals[kind] = totals.get(kind, 0.0) + cpu
print({k: round(v, 1) for k, v in totals.items()})
