"""Where the work dir is (kafka_ferry.storage.workdir): the settings' order, what a URL may hold, whole writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_ferry.storage.workdir import (
    WorkDirError,
    as_path,
    is_local,
    local_base,
    local_dir,
    setting,
    work_base,
    work_dir,
    write_text,
)


def test_the_environment_wins_then_airflow_home():
    assert setting({"KFERRY_WORK_DIR": "/w", "AIRFLOW_HOME": "/h"}) == ("/w", None)
    assert setting({"AIRFLOW_HOME": "/h"}) == ("/h/kafka-ferry", None)
    assert work_dir("orders", {"AIRFLOW_HOME": "/h"}) == Path("/h/kafka-ferry/orders")
    assert setting({"KFERRY_WORK_DIR": "s3://b/w", "KFERRY_WORK_DIR_CONN_ID": "store"}) == ("s3://b/w", "store")


def test_the_airflow_setting_is_read_when_the_environment_names_none(monkeypatch, tmp_path):
    monkeypatch.delenv("KFERRY_WORK_DIR", raising=False)
    monkeypatch.setenv("AIRFLOW__KAFKA_FERRY__WORK_DIR", str(tmp_path / "from-airflow"))
    monkeypatch.setenv("AIRFLOW__KAFKA_FERRY__WORK_DIR_CONN_ID", "store")
    assert setting() == (str(tmp_path / "from-airflow"), "store")
    assert work_base() == tmp_path / "from-airflow"


def test_a_local_work_dir_is_a_plain_path_and_its_own_local_dir():
    env = {"KFERRY_WORK_DIR": "/srv/work", "KFERRY_LOCAL_DIR": "/elsewhere"}
    assert is_local(work_base(env)) and local_base(env) == Path("/srv/work")
    assert local_dir("orders", env) == Path("/srv/work/orders")
    assert as_path("/srv/work/orders/plan-1.json") == Path("/srv/work/orders/plan-1.json")
    assert work_base({"KFERRY_WORK_DIR": "file:///srv/work"}) == Path("/srv/work")  # a URL of a local directory


@pytest.mark.parametrize("url", ["s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/work", "s3://user@bucket/work",
                                 "s3://bucket/work?key=AKIAEXAMPLE", "s3://bucket/work#frag"])
def test_a_url_with_a_user_part_query_or_fragment_is_refused_without_echoing_it(url):
    with pytest.raises(WorkDirError, match="never in the URL") as refused:
        work_base({"KFERRY_WORK_DIR": url})
    assert "wJalrXUtnFEMI" not in str(refused.value) and "AKIAEXAMPLE" not in str(refused.value)
    assert getattr(refused.value, "permanent", False) is True  # no retry heals a setting


def test_a_scheme_no_provider_serves_with_a_connection_is_refused_naming_it():
    with pytest.raises(WorkDirError, match="no Airflow provider installed serves gcs://"):
        work_base({"KFERRY_WORK_DIR": "gcs://bucket/work", "KFERRY_WORK_DIR_CONN_ID": "store"})


def test_an_object_store_work_dir_stages_local_files_elsewhere():
    env = {"KFERRY_WORK_DIR": "memory://kferry-unit/work", "KFERRY_LOCAL_DIR": "/var/kferry"}
    assert not is_local(work_base(env))
    assert local_dir("orders", env) == Path("/var/kferry/orders")


def test_fsspec_paths_round_trip_through_their_text_and_are_written_whole():
    base = work_base({"KFERRY_WORK_DIR": "memory://kferry-unit/round-trip"})
    page = write_text(base / "orders" / "runs" / "r.html", "<p>one</p>")
    again = as_path(str(page))
    assert not is_local(again) and str(again) == str(page) and again.read_text() == "<p>one</p>"
    write_text(again, "<p>two</p>")
    assert page.read_text() == "<p>two</p>"


def test_a_local_write_leaves_no_temporary_file(tmp_path):
    path = write_text(tmp_path / "a" / "report.json", "{}")
    assert path.read_text() == "{}" and sorted(p.name for p in path.parent.iterdir()) == ["report.json"]
