"""The operator's Spark configuration wins (ADR 0054), and letterlog ships to a cluster's
nodes as files (``letterlog spark package``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from spark_replay.conf import safe_defaults
from spark_replay.session import defaults_file
from tests.spark.support import make_store

pytestmark = [pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]
LETTERLOG = [sys.executable, "-m", "adapters.cli"]


def test_letterlogs_defaults_never_replace_what_the_operator_configured():
    configured = {"spark.ui.enabled": "true", "spark.driver.host": "10.0.0.5"}
    added = safe_defaults(configured, "local[2]", {})
    assert "spark.ui.enabled" not in added and "spark.driver.host" not in added
    assert "spark.driver.bindAddress" not in added  # Spark binds where the operator said
    assert added["spark.log.level"] == "WARN"


def test_the_driver_is_bound_to_loopback_only_on_a_local_master_with_nothing_configured():
    assert safe_defaults({}, "local[2,2]", {})["spark.driver.host"] == "127.0.0.1"
    assert "spark.driver.host" not in safe_defaults({}, "local[2]", {"SPARK_LOCAL_IP": "10.1.2.3"})
    assert "spark.driver.host" not in safe_defaults({}, "spark://m:7077", {})


def test_a_log4j2_configuration_in_the_conf_dir_keeps_its_log_level(tmp_path):
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert "spark.log.level" not in safe_defaults({}, "local[2]", {"SPARK_CONF_DIR": str(tmp_path)})


def test_spark_defaults_conf_is_read_as_spark_reads_it(tmp_path):
    (tmp_path / "spark-defaults.conf").write_text(
        "# a comment\nspark.master   spark://m:7077\nspark.a=1\nspark.b : two words\n")
    assert defaults_file({"SPARK_CONF_DIR": str(tmp_path)}) == {
        "spark.master": "spark://m:7077", "spark.a": "1", "spark.b": "two words"}


def test_the_console_entry_point_runs_the_driver_program():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["letterlog-spark"].partition(":")
    assert module == "spark_replay.submit" and callable(getattr(__import__(
        module, fromlist=[name]), name))
    done = subprocess.run([sys.executable, "-m", "spark_replay", "--help"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0 and "rebuild" in done.stdout


def test_a_malformed_conf_is_refused_in_one_line(tmp_path):
    make_store(tmp_path / "data", messages=4)
    done = subprocess.run([*LETTERLOG, "--data", str(tmp_path / "data"), "rebuild", "--all",
                           "--engine", "spark", "--conf", "spark.ui.enabled"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "letterlog: error: --conf: 'spark.ui.enabled' is not KEY=VALUE "
        "(e.g. spark.executor.memory=4g)"]


@pytest.mark.slow
def test_spark_submit_options_and_spark_defaults_win_over_letterlogs_defaults(tmp_path):
    make_store(tmp_path / "data", messages=6)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.sql.shuffle.partitions 3\nspark.log.level INFO\n")
    done = subprocess.run(
        [*LETTERLOG, "--data", str(tmp_path / "data"), "--json", "rebuild", "counters",
         "--engine", "spark", "--conf", "spark.ui.enabled=true", "--conf", "spark.ui.port=0",
         "--conf", "spark.driver.host=127.0.0.1"],
        capture_output=True, text=True, check=False, timeout=600,
        env={**os.environ, "SPARK_CONF_DIR": str(conf)})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    spark_conf = result["spark_conf"]
    assert spark_conf["spark.ui.enabled"] == "true"  # --conf over letterlog's default
    assert spark_conf["spark.sql.shuffle.partitions"] == "3"  # spark-defaults.conf
    assert spark_conf["spark.log.level"] == "INFO"
    assert not {"spark.ui.enabled", "spark.log.level", "spark.driver.host"} & set(
        spark_conf["defaults"])
    assert result["master"] == "local[2,2]"


@pytest.mark.slow
def test_packaged_letterlog_runs_on_executors_whose_python_has_nothing_installed(
        spark_cluster, tmp_path):
    """spark-submit from another directory, the executors on a bare system Python: their
    letterlog and its C-extension dependencies come only from the packaged files."""
    bare = shutil.which("python3.11", path="/usr/bin")
    if bare is None or subprocess.run([bare, "-c", "import msgpack"],
                                      capture_output=True, check=False).returncode == 0:
        pytest.skip("needs a system Python 3.11 without letterlog's dependencies")
    make_store(tmp_path / "data", messages=12)
    packaged = subprocess.run([*LETTERLOG, "--json", "spark", "package", str(tmp_path / "pkg")],
                              capture_output=True, text=True, check=True, timeout=600)
    files = json.loads(packaged.stdout)
    shipped = {d.split("==")[0].lower() for d in files["distributions"]}
    assert {"msgpack", "zstandard", "cryptography", "eventsourcing"} <= shipped
    assert not {"typer", "rich", "pygments", "aiosmtpd", "uvloop", "httpx", "regex"} & shipped
    with tarfile.open(files["archive"]) as archive:
        assert not [n for n in archive.getnames() if n.startswith("zstandard/_cffi.")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    from adapters.sparkjob.environment import spark_env, spark_home

    done = subprocess.run(
        [str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster.master_url,
         "--py-files", files["py_files"], "--archives", f"{files['archive']}#letterlog-deps",
         "--conf", "spark.executorEnv.PYTHONPATH=letterlog-deps",
         "--conf", f"spark.pyspark.python={bare}",
         "--conf", f"spark.pyspark.driver.python={sys.executable}",
         "--conf", "spark.driver.host=127.0.0.1",
         files["driver"], "rebuild", "--all"],
        capture_output=True, text=True, check=False, timeout=600, cwd=elsewhere,
        env={**os.environ, **spark_env(), "LETTERLOG_DATA": str(tmp_path / "data")})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["master"] == spark_cluster.master_url and result["position"] > 0
    verify = subprocess.run([*LETTERLOG, "--data", str(tmp_path / "data"), "verify", "--all"],
                            capture_output=True, text=True, check=False, timeout=600)
    assert verify.returncode == 0, verify.stderr


def test_the_package_follows_the_checkouts_pyproject_not_a_stale_install():
    """An editable install's metadata is as old as its last ``pip install``: a dependency
    added to pyproject.toml since must still be packed for the executors."""
    from adapters.sparkjob.distributions import requirements

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {name.lower().replace("_", "-") for name, _ in requirements("letterlog")}
    assert {d.split("#")[0].strip().split(">")[0].split("<")[0].split("=")[0].split("[")[0]
            .strip().lower().replace("_", "-") for d in declared} <= names
