"""Policy sets already validated, kept between runs: a small `check` without pydantic.

A pull request's `check` of a few files spends most of its time starting: importing
pydantic and building its validators costs more than reading and judging 20 manifests
(docs/performance.md). The CLI therefore keeps each policy set it validated, pickled,
under a key of everything the set was built from:

- every policy file's name and bytes (the listing webhook.sources.policy_files reads),
- the --cluster-profile flag,
- the code that built it and reads it back: the size and mtime of every module of
  this package, the Python version, and the packages of PyYAML, pydantic and
  pydantic-core (a newer one may read or accept a file otherwise).

A set is kept only when it loaded without errors, and only when the files it was built
from are the ones hashed for its key (the digest of what was read says so): a policy
edited meanwhile is validated again on the next run. A failed policy load is never
kept, so its errors are reported every time.

A pickle runs code when it is read, so an entry is read only from a directory and a
file the user owns and nobody else may write (as ssh treats its keys); anything odd
(another owner, loose permissions, a file that does not unpickle to a PolicySet) is
a miss and the set is validated again. The directory is $GPU_ADMISSION_CACHE_DIR, else
$XDG_CACHE_HOME/gpu-admission, else ~/.cache/gpu-admission; GPU_ADMISSION_CACHE_DIR=""
turns the cache off. At most MAX_ENTRIES sets are kept, the oldest removed first.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys
from contextlib import suppress
from importlib.util import find_spec
from pathlib import Path

from webhook.core.engine.policy import PolicySet
from webhook.core.supply.profiles import ProfileName
from webhook.sources.policy_files import (
    files_digest,
    load_policy_dir,
    load_policy_files,
    policy_files,
    read_files,
)

ENV = "GPU_ADMISSION_CACHE_DIR"
MAX_ENTRIES = 32
_FORMAT = b"gpu-admission policy cache 1"
_PACKAGE = Path(__file__).resolve().parents[1]  # webhook/
# What else decides the set a policy directory makes: the YAML reader and the validator.
_READERS = ("yaml", "pydantic", "pydantic_core")


def load_policy_dir_cached(
    directory: str | os.PathLike[str], *, cluster_profile: ProfileName | None = None
) -> PolicySet:
    """load_policy_dir(directory), from the cache when this very set was validated before."""
    root = Path(directory)
    where = cache_dir()
    if where is None or not root.is_dir():
        # (load_policy_dir says what is wrong with the directory)
        return load_policy_dir(root, cluster_profile=cluster_profile)
    files = policy_files(root)
    try:
        digest = files_digest(read_files(files, root))
    except OSError:  # load_policy_dir names the file that cannot be read
        return load_policy_dir(root, cluster_profile=cluster_profile)
    entry = where / (entry_key(digest, cluster_profile) + ".pickle")
    cached = _read(entry)
    if cached is not None:
        return cached
    policy_set = load_policy_files(files, root=root, cluster_profile=cluster_profile)
    if policy_set.digest == digest[:16]:  # built from the bytes hashed for the key
        _write(entry, policy_set)
    return policy_set


def cache_dir() -> Path | None:
    """Where entries are kept; None when the cache is turned off."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu-admission"


def entry_key(files: str, cluster_profile: str | None) -> str:
    """The name of the entry for a set read from files of this digest (files_digest)
    with this flag."""
    digest = hashlib.sha256(_FORMAT)
    digest.update(files.encode())
    digest.update(f"\0{cluster_profile or ''}\0{sys.version}\0".encode())
    digest.update(_code_fingerprint())
    return digest.hexdigest()[:32]


def _code_fingerprint() -> bytes:
    """Size and mtime of every module that builds or reads a set, and of the YAML
    reader's and pydantic's packages: an upgrade or an edit makes every entry a miss."""
    marks = []
    for dirpath, dirnames, filenames in os.walk(_PACKAGE):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                marks.append(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}")
    for package in _READERS:
        spec = find_spec(package)  # found, not imported
        found: os.stat_result | None = None
        with suppress(OSError):  # gone since it was installed: "none", a mark of its own
            found = os.stat(spec.origin) if spec is not None and spec.origin else None
        mark = f"{found.st_size}:{found.st_mtime_ns}" if found else "none"
        marks.append(f"{package}:{mark}")
    return "\n".join(marks).encode()


def _private(st: os.stat_result) -> bool:
    """Owned by this user, writable by nobody else."""
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read(entry: Path) -> PolicySet | None:
    try:
        with open(entry, "rb") as f:
            if not (_private(os.fstat(f.fileno())) and _private(os.stat(entry.parent))):
                return None
            found = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # a truncated or stale entry, whatever it raises: a miss
        return None
    return found if isinstance(found, PolicySet) else None


def _write(entry: Path, policy_set: PolicySet) -> None:
    """Kept if it can be: a read-only home or a full disk only costs the next run time."""
    import tempfile  # a miss only: a warm `check` does without it (tests/cli/test_cli_startup.py)

    try:
        entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(os.stat(entry.parent)):
            return  # it would not be read back
        fd, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".entry-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(policy_set, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, entry)
        except BaseException:
            os.unlink(temporary)
            raise
        _prune(entry.parent)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return


def _prune(where: Path) -> None:
    entries = sorted(where.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns)
    for old in entries[:-MAX_ENTRIES]:
        old.unlink(missing_ok=True)
