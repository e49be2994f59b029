"""YAML reading (contact_sim_ros/yaml_files.py): exponent-form floats, malformed text named."""

import pytest
import yaml

from contact_sim_ros.errors import ConfigError
from contact_sim_ros.yaml_files import YAML_LOADERS, YamlCLoader, YamlLoader, load_yaml, parse_yaml, read_mapping


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


# ------------------------------------------------------------------ libyaml's parser (YamlCLoader)
REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def _python_load(text):
    return yaml.load(text, Loader=YamlLoader)  # noqa: S506 - a SafeLoader subclass


def _same(a, b) -> bool:
    """Equal values of the same types, all the way down (1 == 1.0 == True would hide a resolver difference)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def test_libyaml_is_used_where_pyyaml_has_it():
    assert YAML_LOADERS[-1] is YamlLoader
    if yaml.__with_libyaml__:
        assert YAML_LOADERS == (YamlCLoader, YamlLoader)
        assert issubclass(YamlCLoader, yaml.CSafeLoader)


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml: only the Python loader exists")
def test_every_yaml_file_of_the_package_loads_to_the_same_values_with_both_loaders():
    files = sorted(p for d in ("config", "scenes", "robots") for p in (REPO / d).rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        text = path.read_text()
        assert _same(yaml.load(text, Loader=YamlCLoader), _python_load(text)), path  # noqa: S506
        assert _same(load_yaml(text), _python_load(text)), path


@pytest.mark.parametrize("text", [
    "a: 1e-4\nb: [1, 2.5, .inf, -.nan, 0x1f, 0o17, 1_000]\nc: {d: yes, e: ~, f: '1e-4', g: 2001-12-14}\n",
    "- !!float 1\n- !!str 1\n- &x [1, 2]\n- *x\n- <<: {a: 1}\n  b: 2\n", "", "# only a comment\n", "plain text",
    "key: |\n  a block\n  text\n", "k: 'it''s'\nm: \"tab\\there\\u00e9\"\n",
])
def test_both_loaders_give_the_same_values(text):
    assert _same(load_yaml(text), _python_load(text))


@pytest.mark.parametrize("text", [
    "a: [1, 2\nb: 3\n", "a: 1\n b: 2\n", "a: b: c\n", "key: 'unterminated\n", "- a\nb: 1\n", "a: *nope\n",
    "a: !!python/object:os.system x\n", "a: 1\n\tb: 2\n", "a: \x07\n", "{a: 1}}\n",
])
def test_malformed_yaml_raises_the_python_loaders_error_with_its_line(text, tmp_path):
    with pytest.raises(yaml.YAMLError) as expected:
        _python_load(text)
    with pytest.raises(yaml.YAMLError) as got:
        load_yaml(text)
    assert type(got.value) is type(expected.value) and str(got.value) == str(expected.value)
    detail = " ".join(str(expected.value).split())
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_mapping(path, "a robot preset")
    assert str(err.value) == f"{path}: malformed YAML (a robot preset): {detail}"
    if "line" in str(expected.value):
        assert "line" in str(err.value)


def test_a_parameters_file_reads_the_same_and_reports_malformed_yaml_with_the_file_and_line(tmp_path):
    from contact_sim_ros.driver.config import read_parameter_file
    path = tmp_path / "params.yaml"
    path.write_text("/**:\n  ros__parameters:\n    tol: 1e-4\n    gains: {p: 100, d: 2.5}\n"
                    "sim:\n  ros__parameters:\n    x: [1, 2]\n")
    assert read_parameter_file(path) == [("/**", "/**", {"tol": 1e-4, "gains.p": 100, "gains.d": 2.5}),
                                         ("/sim", "sim", {"x": [1, 2]})]
    path.write_text("sim:\n  ros__parameters:\n    x: [1, 2\n    y: 3\n")
    with pytest.raises(yaml.YAMLError) as expected:
        _python_load(path.read_text())
    with pytest.raises(ConfigError) as err:
        read_parameter_file(path)
    detail = " ".join(str(expected.value).split())
    assert str(err.value) == f"{path}: malformed YAML (parameters file): {detail}"
    assert "line 4" in str(err.value) and "y: 3 ^" in str(err.value)    # the Python loader quotes the line
