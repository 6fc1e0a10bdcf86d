"""The native Codex binary behind a ``[agent] command`` (never the npm node wrapper)."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path

__all__ = ["native_binary"]


def _platform_package() -> tuple[str, str]:
    """(npm platform package suffix, target triple) for this machine."""
    machine = platform.machine().lower()
    arch = "arm64" if machine in ("aarch64", "arm64") else "x64"
    triple_arch = "aarch64" if arch == "arm64" else "x86_64"
    if sys.platform == "darwin":
        return f"darwin-{arch}", f"{triple_arch}-apple-darwin"
    return f"linux-{arch}", f"{triple_arch}-unknown-linux-musl"


def native_binary(program: str, workdir: Path) -> Path:
    """The native Codex binary for ``program`` (a native binary, or the npm wrapper); raises FileNotFoundError."""
    path = Path(program).expanduser()
    if not path.is_absolute():
        found = shutil.which(program) if "/" not in program else None
        path = Path(found) if found else (workdir / path)
    path = path.resolve()
    if not path.is_file():
        raise FileNotFoundError(f"codex program {program!r} not found")
    if path.name == "codex.js" or path.suffix == ".js":
        package = path.parent.parent  # .../@openai/codex/bin/codex.js -> .../@openai/codex
        suffix, triple = _platform_package()
        candidates = [
            package.parent / f"codex-{suffix}" / "vendor" / triple / "bin" / "codex",  # sibling package
            package / "node_modules" / "@openai" / f"codex-{suffix}" / "vendor" / triple / "bin" / "codex",
            package / "vendor" / triple / "codex" / "codex",  # older layout
        ]
        for candidate in candidates:
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        raise FileNotFoundError(f"{program!r} is the npm wrapper and its native binary (@openai/codex-{suffix}) is not installed")
    return path
