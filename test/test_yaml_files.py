"""YAML reading (contact_sim_ros/yaml_files.py): exponent-form floats, malformed text named."""

import pytest
import yaml

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.yaml_files import load_yaml, parse_yaml, read_mapping


@pytest.mark.parametrize("text, value", [
    ("1e-4", 1e-4), ("-2E5", -2e5), (".5e3", 500.0), ("+3e+2", 300.0), ("1.0e5", 1e5), ("1.e5", 1e5),
    ("1.0e-4", 1e-4), ("1_000e-3", 1.0),
])
def test_exponent_floats_are_floats(text, value):
    loaded = load_yaml(text)
    assert isinstance(loaded, float) and loaded == pytest.approx(value)


@pytest.mark.parametrize("text, value", [
    ("1", 1), ("0x10", 16), ("1.5", 1.5), (".inf", float("inf")), ("e5", "e5"), ("1e", "1e"), ("1e4.5", "1e4.5"),
    ("'1e-4'", "1e-4"), ("1.2.3e4", "1.2.3e4"), ("true", True), ("null", None),
])
def test_everything_else_resolves_as_safe_load_does(text, value):
    assert load_yaml(text) == value == yaml.safe_load(text)


def test_files_and_engine_options_read_1e_minus_4_as_a_float(tmp_path):
    from contact_sim_ros.engines.registry import engine_class
    assert yaml.safe_load("1e-4") == "1e-4"           # PyYAML's YAML 1.1: the reason for YamlLoader
    path = tmp_path / "options.yaml"
    path.write_text("stiction_tolerance: 1e-4\nrelative_tolerance: 1E-6\n")
    data = read_mapping(path, "engine options")
    assert data == {"stiction_tolerance": 1e-4, "relative_tolerance": 1e-6}
    options = engine_class("lagged").make_options(data)
    assert options.stiction_tolerance == 1e-4


def test_malformed_yaml_is_a_config_error_naming_the_thing():
    with pytest.raises(ConfigError, match=r"engine option 'x': malformed YAML '\[1'"):
        parse_yaml("[1", "engine option 'x'")
    assert parse_yaml("{a: 1e-3}", "x") == {"a": 1e-3}
