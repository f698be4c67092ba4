"""`make data` offline behaviour: verified downloads, clean failures, atomic extraction."""

import hashlib
import io
import tarfile

import pytest

from dlcluster.trace.download import DownloadError, download, extract, fetch_trace


def _archive(tmp_path, members=(("trace-data/cluster_job_log", "[]"), ("trace-data/cluster_machine_list", "x"))):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in members:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "src.tar.gz"
    path.write_bytes(buf.getvalue())
    return path, hashlib.sha256(buf.getvalue()).hexdigest()


def test_verified_download_and_extract(tmp_path):
    src, sha = _archive(tmp_path)
    raw = tmp_path / "raw"
    out = fetch_trace(src.as_uri(), raw, expected_sha256=sha)
    assert out == raw / "philly" and (out / "cluster_job_log").read_text() == "[]"
    assert sorted(p.name for p in raw.iterdir()) == ["philly", "trace-data.tar.gz"]


def test_checksum_mismatch_leaves_nothing(tmp_path):
    src, _ = _archive(tmp_path)
    with pytest.raises(DownloadError, match="does not match"):
        download(src.as_uri(), tmp_path / "raw" / "t.tar.gz", expected_sha256="0" * 64)
    assert list((tmp_path / "raw").iterdir()) == []


def test_no_network_is_a_clear_message_and_leaves_nothing(tmp_path):
    with pytest.raises(DownloadError, match="needs internet access; nothing was left behind"):
        download("http://127.0.0.1:9/trace-data.tar.gz", tmp_path / "t.tar.gz", expected_sha256="0" * 64, timeout=2)
    assert list(tmp_path.iterdir()) == []


def test_archive_without_job_log_is_rejected(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("other.txt")
        tar.addfile(info, io.BytesIO(b""))
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(buf.getvalue())
    with pytest.raises(DownloadError, match="no cluster_job_log"):
        extract(archive, tmp_path / "philly")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz"]


@pytest.fixture(params=[True, False], ids=["data filter", "no filter (Python < 3.11.4)"])
def tar_filter(request, monkeypatch):
    """Extraction with tarfile's "data" filter (Python 3.11.4+), or as on earlier 3.11 releases, which have none."""
    if request.param and not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python's tarfile has no extraction filter")
    if not request.param:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)


def test_extracts_with_or_without_tarfiles_filter(tmp_path, tar_filter):
    src, _ = _archive(tmp_path)
    out = extract(src, tmp_path / "philly")
    assert (out / "cluster_job_log").read_text() == "[]" and (out / "cluster_machine_list").read_text() == "x"


def test_a_member_outside_the_archive_is_refused_and_nothing_is_left(tmp_path, tar_filter):
    src, _ = _archive(tmp_path, [("trace-data/cluster_job_log", "[]"), ("../escape.txt", "x")])
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(DownloadError, match="refused to extract"):
        extract(src, work / "philly")
    assert list(work.iterdir()) == [] and not (tmp_path / "escape.txt").exists()
