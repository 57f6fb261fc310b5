"""Configuration: precedence, pass-through tables, and errors that name the setting."""

from __future__ import annotations

import argparse

import pytest

import config
from config import ConfigError, parse_duration


def test_defaults_are_the_papers_table_1():
    cfg = config.load(environ={})
    assert cfg["distributor.threshold"] == 0.5
    assert cfg["distributor.min_items"] == 1000
    assert cfg["distributor.wait_periods"] == 3
    assert cfg["distributor.period"] == 10.0
    assert cfg["distributor.min_improvement"] == 0.3


def test_compacted_topics_by_default():
    cfg = config.load(environ={})
    assert cfg["topics.subscriptions.config"]["cleanup.policy"] == "compact"
    assert cfg["topics.control.config"]["cleanup.policy"] == "compact"
    assert cfg.topic("dead_letter") == "dead-letter"


def test_a_config_file_sets_a_topics_retention_on_top_of_the_defaults(tmp_path):
    f = tmp_path / "geops.toml"
    f.write_text('[topics.publications]\nconfig = { "retention.ms" = "300000" }\n')
    cfg = config.load(environ={"GEOPS_CONFIG": str(f)})
    assert cfg["topics.publications.config"]["retention.ms"] == "300000"
    assert cfg["topics.publications.config"]["segment.ms"] == "3600000"  # the default's
    f.write_text('[topics.nosuch]\nconfig = { "retention.ms" = "1" }\n')
    with pytest.raises(config.ConfigError, match=r"unknown setting 'topics\.nosuch\.config'"):
        config.load(environ={"GEOPS_CONFIG": str(f)})


def test_precedence_file_then_env_then_flags(tmp_path):
    f = tmp_path / "geops.toml"
    f.write_text('[distributor]\nthreshold = 0.7\nperiod = "2s"\n[topics.control]\nname = "c1"\n')
    cfg = config.load(f, environ={})
    assert cfg["distributor.threshold"] == 0.7 and cfg["distributor.period"] == 2.0
    assert cfg.topic("control") == "c1"
    cfg = config.load(f, environ={"GEOPS_DISTRIBUTOR_THRESHOLD": "0.8",
                                  "GEOPS_CONTROL_TOPIC": "c2"})
    assert cfg["distributor.threshold"] == 0.8 and cfg.topic("control") == "c2"
    cfg = config.load(f, environ={"GEOPS_DISTRIBUTOR_THRESHOLD": "0.8"},
                      flags={"distributor.threshold": "0.9"})
    assert cfg["distributor.threshold"] == 0.9
    assert cfg["distributor.period"] == 2.0  # untouched by env/flags


def test_config_file_from_environment(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[app]\nstrategy = "ripsp"\n')
    with pytest.raises(ConfigError, match=r"app\.strategy.*expected one of"):
        config.load(environ={"GEOPS_CONFIG": str(f)})
    f.write_text('[app]\nstrategy = "rihps"\n')
    assert config.load(environ={"GEOPS_CONFIG": str(f)})["app.strategy"] == "RIhPS"


def test_kafka_properties_pass_through_from_every_source(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[kafka.client]\n"security.protocol" = "SSL"\n"ssl.ca.location" = "/ca"\n')
    cfg = config.load(f, environ={"GEOPS_KAFKA_SASL_MECHANISM": "PLAIN",
                                  "GEOPS_BOOTSTRAP_SERVERS": "k1:9093"},
                      kafka_properties=["security.protocol=SASL_SSL", "client.id=x=y"])
    conf = cfg.kafka_client()
    assert conf == {"security.protocol": "SASL_SSL", "ssl.ca.location": "/ca",
                    "sasl.mechanism": "PLAIN", "client.id": "x=y", "bootstrap.servers": "k1:9093"}


@pytest.mark.parametrize("kwargs,needle", [
    ({"environ": {"GEOPS_DISTRIBUTOR_THRESHOLD": "abc"}},
     "GEOPS_DISTRIBUTOR_THRESHOLD (distributor.threshold): expected a number"),
    ({"environ": {}, "flags": {"app.workers": "-1"}}, "--workers (app.workers): must be at least"),
    ({"environ": {}, "flags": {"distributor.period": "soon"}},
     "--period (distributor.period): expected a duration"),
    ({"environ": {}, "flags": {"app.join": "both"}}, "--join (app.join): expected one of"),
    ({"environ": {}, "kafka_properties": ["nonsense"]}, "-X expects key=value"),
    ({"environ": {"GEOPS_PUBLICATIONS_PARTITIONS": "0"}}, "GEOPS_PUBLICATIONS_PARTITIONS"),
])
def test_bad_values_name_the_setting(kwargs, needle):
    with pytest.raises(ConfigError) as err:
        config.load(**kwargs)
    assert needle in str(err.value)


def test_unknown_key_in_file_is_named(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[app]\nstrtegy = "sPS"\n')
    with pytest.raises(ConfigError, match=r"unknown setting 'app\.strtegy'"):
        config.load(f, environ={})
    f.write_text("[app\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(f, environ={})
    with pytest.raises(ConfigError, match="file not found"):
        config.load(tmp_path / "missing.toml", environ={})


def test_argparse_integration(tmp_path):
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, ["kafka", "topics", "distributor"])
    args = parser.parse_args(["--metrics-topic", "m2", "--threshold", "0.6", "-X", "acks=all",
                              "--bootstrap-servers", "h:1"])
    cfg = config.from_args(args, environ={})
    assert cfg.topic("metrics") == "m2"
    assert cfg["distributor.threshold"] == 0.6
    assert cfg.kafka_client()["acks"] == "all"
    assert cfg.kafka_client()["bootstrap.servers"] == "h:1"


def test_every_topic_has_a_flag_and_env():
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, ["topics"])
    flags = {a.option_strings[0] for a in parser._actions if a.option_strings}
    for t in config.TOPICS:
        assert f"--{t.replace('_', '-')}-topic" in flags


@pytest.mark.parametrize("text,seconds", [("500ms", 0.5), ("10s", 10), ("2m", 120), (3, 3.0),
                                          ("1.5", 1.5), ("1h", 3600)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_bootstrap_defaults_to_running_embedded_broker(tmp_path):
    cfg = config.load(environ={"GEOPS_STATE_DIR": str(tmp_path)})
    assert cfg.bootstrap_servers() == "127.0.0.1:9092"  # nothing running in this state dir
