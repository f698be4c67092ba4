"""Curve loaders: Pollux artifact, CSV logs, TensorBoard event files (written here byte by byte)."""

import base64
import gzip
import struct

import numpy as np
import pandas as pd
import pytest

from dlcluster.sources.curves import (
    CURVE_COLUMNS,
    concat_curves,
    POLLUX_METRICS,
    crc32c,
    drop_short_curves,
    guess_direction,
    keep_metric,
    load_csv_curves,
    load_curve_source,
    load_pollux_curves,
    load_tensorboard_curves,
    masked_crc32c,
    sample_jobs,
    validate_curves,
)

# ---------------------------------------------------------------- a minimal event-file writer
# Independent of the reader: protobuf encoding written from the wire-format spec.


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    key = _varint(number << 3 | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _event(wall_time: float, step: int = 0, summary: bytes | None = None, file_version: str | None = None) -> bytes:
    msg = _field(1, 1, struct.pack("<d", wall_time))
    if step:
        msg += _field(2, 0, _varint(step))
    if file_version:
        msg += _field(3, 2, file_version.encode())
    if summary is not None:
        msg += _field(5, 2, summary)
    return msg


def _simple_value(tag: str, value: float) -> bytes:
    return _field(1, 2, _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", value)))


def _tensor_value(tag: str, value: float) -> bytes:
    # TF2 style: TensorProto{dtype: DT_FLOAT, tensor_shape: {}, float_val: [value]} (packed)
    tensor = _field(1, 0, _varint(1)) + _field(2, 2, b"") + _field(5, 2, struct.pack("<f", value))
    return _field(1, 2, _field(1, 2, tag.encode()) + _field(8, 2, tensor))


def _histogram_tensor(tag: str) -> bytes:
    # a rank-2 float tensor (shape [2, 3]): not a scalar, must be skipped
    shape = _field(2, 2, _field(1, 0, _varint(2))) + _field(2, 2, _field(1, 0, _varint(3)))
    tensor = _field(1, 0, _varint(1)) + _field(2, 2, shape) + _field(5, 2, struct.pack("<6f", *range(6)))
    return _field(1, 2, _field(1, 2, tag.encode()) + _field(8, 2, tensor))


def _record(payload: bytes) -> bytes:
    length = struct.pack("<Q", len(payload))
    return (length + struct.pack("<I", masked_crc32c(length)) + payload
            + struct.pack("<I", masked_crc32c(payload)))


def _write_events(path, events) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(_record(e) for e in events))


# ---------------------------------------------------------------- CRC


def test_crc32c_known_answers():
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4: 32 bytes of zeros


# ---------------------------------------------------------------- TensorBoard


def test_tensorboard_scalars_both_styles_and_wall_time_seconds(tmp_path):
    run = tmp_path / "logs" / "run_a"
    _write_events(run / "events.out.tfevents.1.host", [
        _event(100.0, file_version="brain.Event:2"),
        _event(110.0, 1, _simple_value("train/loss", 0.5) + _histogram_tensor("weights")),
        _event(130.0, 2, _simple_value("train/loss", 0.25)),
        _event(160.0, 3, _tensor_value("train/loss", 0.125)),
        _event(160.5, 3, _tensor_value("val_accuracy", 0.75)),
    ])
    loaded = load_tensorboard_curves(tmp_path / "logs", outcome="passed")
    curves = loaded.curves
    loss = curves[curves["metric"] == "train/loss"]
    assert list(loss["job"].unique()) == ["run_a"]
    assert loss["value"].tolist() == [0.5, 0.25, 0.125]
    assert loss["direction"].unique().tolist() == ["lower"]
    assert loss["epoch"].tolist() == [1, 2, 3] and loss["progress"].tolist() == [1.0, 2.0, 3.0]
    assert loss["seconds"].tolist() == [10.0, 20.0, 30.0]  # first from the file_version event at 100
    acc = curves[curves["metric"] == "val_accuracy"]
    assert acc["direction"].tolist() == ["higher"] and acc["value"].tolist() == [0.75]
    assert set(curves["seconds_kind"]) == {"wall"} and set(curves["outcome"]) == {"passed"}
    dropped = loaded.dropped.set_index("reason")["rows"]
    assert dropped["non-scalar summary value"] == 1


def test_tensorboard_restart_keeps_the_last_write_and_truncated_tail_is_counted(tmp_path):
    run = tmp_path / "run_b"
    _write_events(run / "events.out.tfevents.1.host", [
        _event(10.0, file_version="brain.Event:2"),
        _event(11.0, 1, _simple_value("loss", 4.0)),
        _event(12.0, 2, _simple_value("loss", 3.0)),
    ])
    # the job restarted from its step-1 checkpoint: step 2 is written again, then the writer died mid-record
    second = b"".join(_record(e) for e in [
        _event(20.0, file_version="brain.Event:2"),
        _event(21.0, 2, _simple_value("loss", 2.5)),
        _event(22.0, 3, _simple_value("loss", 2.0)),
    ]) + _record(_event(23.0, 4, _simple_value("loss", 1.0)))[:-3]
    (run / "events.out.tfevents.2.host").write_bytes(second)
    loaded = load_tensorboard_curves(run)
    assert loaded.curves["value"].tolist() == [4.0, 2.5, 2.0]
    assert loaded.curves["job"].unique().tolist() == ["run_b"]
    dropped = loaded.dropped.set_index("reason")["rows"]
    assert dropped["step written again later (kept the last)"] == 1
    assert dropped["truncated last record"] == 1


def test_tensorboard_corrupt_record_names_file_and_offset(tmp_path):
    path = tmp_path / "events.out.tfevents.9.host"
    data = bytearray(_record(_event(1.0, file_version="x")) + _record(_event(2.0, 1, _simple_value("loss", 1.0))))
    data[-6] ^= 0xFF  # flip a payload byte of the second record
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"events\.out\.tfevents\.9\.host: record at byte \d+: payload checksum"):
        load_tensorboard_curves(tmp_path)
    data = bytearray(_record(_event(1.0, file_version="x")) + _record(_event(2.0, 1, _simple_value("loss", 1.0))))
    data[-1] ^= 0xFF  # break only the stored checksum: the payload itself is intact
    path.write_bytes(bytes(data))
    assert load_tensorboard_curves(tmp_path, verify=False).curves["value"].tolist() == [1.0]


def test_tensorboard_unknown_metric_direction_is_an_error(tmp_path):
    _write_events(tmp_path / "r" / "events.out.tfevents.1.h", [_event(1.0, 1, _simple_value("lr", 0.1))])
    with pytest.raises(ValueError, match=r"metric 'lr'.*directions="):
        load_tensorboard_curves(tmp_path)
    curves = load_tensorboard_curves(tmp_path, directions={"lr": "lower"}).curves
    assert curves["direction"].tolist() == ["lower"]
    with pytest.raises(FileNotFoundError):
        load_tensorboard_curves(tmp_path / "r" / "nothing-here")


# ---------------------------------------------------------------- CSV logs


def test_wide_csv_log_like_keras(tmp_path):
    path = tmp_path / "job7.csv"
    path.write_text("epoch,loss,val_loss,accuracy,sec\n2,0.4,,0.8,3\n0,1.0,1.2,0.5,2\n1,0.5,nan,0.7,2\n")
    loaded = load_csv_curves(path, seconds_column="sec", outcome="killed")
    c = loaded.curves.set_index(["metric", "epoch"])
    assert c.loc[("loss", 1), "value"] == 1.0 and c.loc[("loss", 3), "value"] == 0.4  # sorted, renumbered
    assert c.loc[("loss", 3), "progress"] == 2.0 and c.loc[("loss", 3), "seconds"] == 3.0
    assert np.isnan(c.loc[("val_loss", 2), "value"])  # logged 'nan' (diverged) is kept
    assert len(loaded.curves[loaded.curves["metric"] == "val_loss"]) == 2  # the empty cell is dropped
    assert loaded.dropped["rows"].sum() == 1
    assert c.loc[("accuracy", 1), "direction"] == "higher" and c.loc[("val_loss", 1), "direction"] == "lower"
    assert set(loaded.curves["job"]) == {"job7"} and set(loaded.curves["outcome"]) == {"killed"}
    assert set(loaded.curves["seconds_kind"]) == {"gpu"}


def test_wide_csv_reads_only_the_chosen_metrics(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("epoch,time,note,val_loss\n1,12:00,warmup,0.9\n2,12:05,,0.7\n")
    curves = load_csv_curves(path, metrics=["val_loss"], job="mine").curves
    assert curves["metric"].unique().tolist() == ["val_loss"] and curves["value"].tolist() == [0.9, 0.7]
    with pytest.raises(ValueError, match=r"line 2, field 'note': 'warmup' is not a number"):
        load_csv_curves(path, metrics=["note"], directions={"note": "lower"})
    with pytest.raises(ValueError, match="missing column 'secs'"):
        load_csv_curves(path, metrics=["val_loss"], seconds_column="secs")


def test_csv_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("epoch,loss\n0,1.0\n1,oops\n")
    with pytest.raises(ValueError, match=r"bad\.csv: line 3, field 'loss': 'oops' is not a number"):
        load_csv_curves(path)
    path.write_text("epoch,loss\n0,1.0\n0,0.5\n")
    with pytest.raises(ValueError, match=r"line 3, field 'epoch': epoch logged twice"):
        load_csv_curves(path)
    path.write_text("step,loss\n0,1.0\n")
    with pytest.raises(ValueError, match="neither a tidy curve file"):
        load_csv_curves(path)
    path.write_text("epoch,throughput\n0,1.0\n")
    with pytest.raises(ValueError, match="metric 'throughput'"):
        load_csv_curves(path)


def test_tidy_csv_round_trip_and_duplicate_epoch(tmp_path):
    path = tmp_path / "tidy.csv"
    path.write_text("job,metric,epoch,value,outcome\nj1,loss,1,2.0,passed\nj1,loss,2,1.0,passed\n"
                    "j2,f1,5,0.3,killed\nj2,f1,6,inf,killed\n")
    curves = load_csv_curves(path).curves
    assert list(curves.columns) == list(CURVE_COLUMNS)
    j2 = curves[curves["job"] == "j2"]
    assert j2["epoch"].tolist() == [1, 2] and j2["progress"].tolist() == [5.0, 6.0]
    assert j2["direction"].unique().tolist() == ["higher"] and np.isnan(j2["value"].iloc[1])
    path.write_text("job,metric,epoch,value\nj1,loss,1,2.0\nj1,loss,1,1.0\n")
    with pytest.raises(ValueError, match=r"line 3: job 'j1' metric 'loss' has epoch 1 twice"):
        load_csv_curves(path)


def test_guess_direction():
    assert [guess_direction(m) for m in ("loss", "val_loss", "train/error", "wer", "top1_accuracy",
                                         "val_acc", "f1", "mAP", "lr")] == \
        ["lower", "lower", "lower", "lower", "higher", "higher", "higher", "higher", None]


def test_validate_curves_rejects_out_of_order_epochs_and_bad_fields():
    df = pd.DataFrame({"source": "s", "job": "j", "metric": "loss", "direction": "lower", "epoch": [1, 3],
                       "progress": np.nan, "value": [1.0, 0.5], "seconds": np.nan, "seconds_kind": "none",
                       "outcome": "passed"})
    with pytest.raises(ValueError, match="has epoch 3"):
        validate_curves(df, "test")
    with pytest.raises(ValueError, match="field 'direction' has value 'down'"):
        validate_curves(df.assign(epoch=[1, 2], direction="down"), "test")
    with pytest.raises(ValueError, match="negative seconds"):
        validate_curves(df.assign(epoch=[1, 2], seconds=[1.0, -1.0]), "test")


# ---------------------------------------------------------------- the real Pollux curves


def test_pollux_curves_load_with_checked_directions():
    curves = load_pollux_curves().curves
    assert curves["job"].nunique() == 40
    epochs = curves.groupby("job")["epoch"].max()
    # each model's files hold the epoch budget the Pollux simulator uses for it
    for model, budget in {"bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80,
                          "yolov3": 50}.items():
        assert (epochs[epochs.index.str.startswith(model + "/")] == budget).all(), model
    first = curves[(curves["job"] == "cifar10/bsz128") & (curves["epoch"] == 1)]
    assert first["value"].item() == 0.4455 and first["metric"].item() == "top1_accuracy"
    # our per-model direction agrees with the Pollux simulator's rule (first < last: higher is better)
    for job, curve in curves.groupby("job"):
        rule = "higher" if curve["value"].iloc[0] < curve["value"].iloc[-1] else "lower"
        assert curve["direction"].iloc[0] == rule == POLLUX_METRICS[job.split("/")[0]][1], job
    assert set(curves["outcome"]) == {"passed"} and set(curves["seconds_kind"]) == {"none"}


def test_pollux_loader_rejects_unknown_model_and_bad_cells(tmp_path):
    (tmp_path / "gpt9").mkdir()
    (tmp_path / "gpt9" / "validation-8.csv").write_text("progress,iteration,metric,grad_sqr,grad_var\n1,1,0.5,1,1\n")
    with pytest.raises(ValueError, match="unknown Pollux model 'gpt9'"):
        load_pollux_curves(tmp_path)
    bad = tmp_path / "bad"
    (bad / "ncf").mkdir(parents=True)
    (bad / "ncf" / "validation-8.csv").write_text("progress,iteration,metric,grad_sqr,grad_var\n1,1,x,1,1\n")
    with pytest.raises(ValueError, match=r"validation-8\.csv: line 2, field 'metric'"):
        load_pollux_curves(bad)


def test_curve_source_specs(tmp_path):
    assert load_curve_source("pollux").curves["source"].unique().tolist() == ["pollux"]
    path = tmp_path / "log.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("epoch,loss\n0,2\n1,1\n")
    assert load_curve_source(f"csv:{path}").curves["value"].tolist() == [2.0, 1.0]
    with pytest.raises(ValueError, match="expected 'pollux'"):
        load_curve_source("wandb:foo")


# ---------------------------------------------------------------- selecting curves


def _loaded(tmp_path):
    path = tmp_path / "t.csv"
    rows = ["job,metric,epoch,value"]
    for job, n in (("a", 3), ("b", 1), ("c", 2), ("d", 2)):
        rows += [f"{job},loss,{e},{1 / e}" for e in range(1, n + 1)]
        rows += [f"{job},acc,{e},{e / 10}" for e in range(1, n + 1)]
    path.write_text("\n".join(rows) + "\n")
    return load_csv_curves(path, source="s")


def test_keep_metric_drop_short_and_sample_count_what_they_remove(tmp_path):
    loaded = _loaded(tmp_path)
    kept = keep_metric(loaded, "s", "loss")
    assert set(kept.curves["metric"]) == {"loss"}
    assert kept.dropped[["rows", "curves"]].values.tolist() == [[8, 4]]
    short = drop_short_curves(kept, 2)
    assert sorted(short.curves["job"].unique()) == ["a", "c", "d"]
    assert short.dropped["curves"].tolist() == [4, 1]
    sampled = sample_jobs(short, 2, seed=0)
    assert sampled.curves["job"].nunique() == 2
    assert sampled.dropped["curves"].iloc[-1] == 1
    again = sample_jobs(short, 2, seed=0)
    assert sorted(again.curves["job"].unique()) == sorted(sampled.curves["job"].unique())
    assert sample_jobs(short, None, seed=0) is short
    with pytest.raises(ValueError, match="no metric 'f1'"):
        keep_metric(loaded, "s", "f1")


def test_the_same_source_twice_is_an_error():
    with pytest.raises(ValueError, match=r"curve \('pollux', 'bert/bsz12', 'squad_f1_pct'\) is loaded twice"):
        concat_curves([load_pollux_curves(), load_pollux_curves()])


# Written by the tensorboard package itself (2.21.0: EventFileWriter, summary_pb2, tensor_util.make_tensor_proto),
# once, outside the project: train/loss as simple_value (what torch.utils.tensorboard writes), val/accuracy (float32)
# and val/loss (float64) as TF2 scalar tensors, a [2, 3] histogram tensor and a text tensor; TensorBoard's own
# EventAccumulator read back the same scalars. The writer's first event (file_version) carries its creation time.
REAL_EVENT_FILE = base64.b64decode(
    "SAAAAAAAAAD+kkidCWdbgOt/wNpBGg1icmFpbi5FdmVudDoyUi4KLHRlbnNvcmJvYXJkLnN1bW1hcnkud3JpdGVyLmV2ZW50"
    "X2ZpbGVfd3JpdGVyBKhqiyAAAAAAAAAAKe2pUAkAAIAEgMDaQRABKhMKEQoKdHJhaW4vbG9zcxUAACBAxRpDECAAAAAAAAAA"
    "Ke2pUAkAAAAHgMDaQRACKhMKEQoKdHJhaW4vbG9zcxUAAKA/iBU6FiAAAAAAAAAAKe2pUAkAAAAMgMDaQRADKhMKEQoKdHJh"
    "aW4vbG9zcxUAAEA/OpHT0TgAAAAAAAAAo3l9VwkAAMAEgMDaQRABKisKKQoMdmFsL2FjY3VyYWN5QgoIARIAKgQAAAA/Sg0K"
    "CQoHc2NhbGFycyABiBHmOTgAAAAAAAAAo3l9VwkAAEAHgMDaQRACKisKKQoMdmFsL2FjY3VyYWN5QgoIARIAKgQAACA/Sg0K"
    "CQoHc2NhbGFycyABcFbHYTgAAAAAAAAAo3l9VwkAAEAMgMDaQRADKisKKQoMdmFsL2FjY3VyYWN5QgoIARIAKgQAAEA/Sg0K"
    "CQoHc2NhbGFycyAB+YY4JzgAAAAAAAAAo3l9VwkAAIAMgMDaQRADKisKKQoIdmFsL2xvc3NCDggCEgAyCJqZmZmZmbk/Sg0K"
    "CQoHc2NhbGFycyABIlgc4WoAAAAAAAAAr4HtZwkAAIAOgMDaQRADKl0KWwoHd2VpZ2h0c0I+CAISCBICCAISAggDIjAAAAAA"
    "AAAAAAAAAAAAAPA/AAAAAAAACEAAAAAAAADwPwAAAAAAAABAAAAAAAAAHEBKEAoMCgpoaXN0b2dyYW1zIALgGeJULwAAAAAA"
    "AABtXR1QCQAAwA6AwNpBEAMqIgogCgVub3Rlc0ILCAcSAEIFaGVsbG9KCgoGCgR0ZXh0IAJYn6S3"
)


def test_reads_an_event_file_written_by_tensorboard(tmp_path):
    (tmp_path / "run1").mkdir()
    (tmp_path / "run1" / "events.out.tfevents.1.vm.fixture").write_bytes(REAL_EVENT_FILE)
    loaded = load_tensorboard_curves(tmp_path)
    curves = {m: part for m, part in loaded.curves.groupby("metric")}
    assert sorted(curves) == ["train/loss", "val/accuracy", "val/loss"]
    assert curves["train/loss"]["value"].tolist() == [2.5, 1.25, 0.75]
    assert curves["train/loss"]["progress"].tolist() == [1.0, 2.0, 3.0]
    assert curves["train/loss"]["seconds"].tolist()[1:] == [10.0, 20.0] and curves["train/loss"]["seconds"].iloc[0] > 0
    assert curves["val/accuracy"]["value"].tolist() == [0.5, 0.625, 0.75]
    assert curves["val/loss"]["value"].tolist() == [0.1]
    assert loaded.dropped.set_index("reason").loc["non-scalar summary value", "rows"] == 2

