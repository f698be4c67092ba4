"""``make data``: fetch the full Philly trace, verify it, extract it.

Nothing half-done is left behind: the archive is downloaded to ``*.part`` and
renamed only when its sha256 matches; extraction goes to a temporary folder
renamed to ``data/raw/philly`` only when complete.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from tqdm.auto import tqdm

TRACE_URL = "https://media.githubusercontent.com/media/msr-fiddle/philly-traces/master/trace-data.tar.gz"
TRACE_SHA256 = "2037ccf63a725a02be718b0e1aeee6142c90b7f62d0d849295120e9f6ba13d2c"
ARCHIVE_NAME = "trace-data.tar.gz"
CHUNK = 1 << 20


class DownloadError(RuntimeError):
    pass


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, target: Path, expected_sha256: str, timeout: float = 30.0) -> Path:
    """Stream ``url`` to ``target`` (via ``target.part``) and check its sha256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and sha256_of(target) == expected_sha256:
        return target
    part = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(part, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=f"downloading {target.name}") as bar:
                for block in iter(lambda: resp.read(CHUNK), b""):
                    out.write(block)
                    digest.update(block)
                    bar.update(len(block))
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        part.unlink(missing_ok=True)
        raise DownloadError(f"could not download {url}: {exc}. The full trace needs internet access; "
                            "nothing was left behind. The embedded public data works offline.") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    actual = digest.hexdigest()
    if actual != expected_sha256:
        part.unlink(missing_ok=True)
        raise DownloadError(f"{url}: sha256 {actual} does not match the expected {expected_sha256}; "
                            "the download was deleted")
    part.rename(target)
    return target


def _extract_all(tar: tarfile.TarFile, into: Path, archive: Path) -> None:
    """Every member of ``tar`` into ``into``, refusing a member that could land outside it.

    tarfile's "data" filter does that on Python 3.11.4 and later (PEP 706); an earlier 3.11 release (Debian's 3.11.2,
    which ``make`` may choose: scripts/pick_python.py) has no filter, and gets a stricter rule, which an archive of
    files in folders meets: plain files and folders, named inside the archive (no absolute name, no ``..``)."""
    if hasattr(tarfile, "data_filter"):
        try:
            tar.extractall(into, filter="data")
        except tarfile.FilterError as exc:
            raise DownloadError(f"{archive}: refused to extract: {exc}") from None
        return
    for member in tar.getmembers():
        if member.name.startswith("/") or ".." in Path(member.name).parts or not (member.isfile() or member.isdir()):
            raise DownloadError(f"{archive}: refused to extract {member.name!r}: only plain files and folders named "
                                "inside the archive are extracted")
    tar.extractall(into)


def extract(archive: Path, destination: Path) -> Path:
    """Extract into ``destination`` atomically; returns the folder holding ``cluster_job_log``."""
    if (destination / "cluster_job_log").exists():
        return destination
    tmp = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}."))
    try:
        with tarfile.open(archive) as tar:
            _extract_all(tar, tmp, archive)
        found = next((p.parent for p in tmp.rglob("cluster_job_log")), None)
        if found is None:
            raise DownloadError(f"{archive}: no cluster_job_log inside; not the Philly trace archive")
        if destination.exists():
            shutil.rmtree(destination)
        found.rename(destination)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return destination


def fetch_trace(url: str, raw_dir: Path, expected_sha256: str = TRACE_SHA256) -> Path:
    archive = download(url, raw_dir / ARCHIVE_NAME, expected_sha256)
    return extract(archive, raw_dir / "philly")
