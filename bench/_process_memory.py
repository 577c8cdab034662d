"""Memory of a running process, as Linux reports it in /proc/PID/status (shared by the exporter benches)."""

from pathlib import Path


def status_mib(pid: int, field: str) -> float:
    """A /proc/PID/status field given in kB, in MiB: VmRSS (resident now) or VmHWM (peak resident)."""
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(f"{field}:"):
            return int(row.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")
