"""One name per idea across subcommands, flags against their environment variables,
and learner modules that fail to import."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
from test_cli import EXE, cli

from stream_nb import CategoricalNB
from stream_nb.cli.flags import split_env_list
from stream_nb.engine.checkpoint import Checkpointer


def help_options(*command: str) -> set[str]:
    """The option strings a command's ``--help`` shows (usage line and option list)."""
    text = cli(*command, "--help").stdout.decode()
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))


def test_demo_takes_the_same_names_as_run_and_keeps_the_old_ones():
    canonical = cli("demo", "--demo", "categorical", "--limit", "40", "--seed", "3").stdout
    old = cli("demo", "--stream", "categorical", "-n", "40", "--seed", "3").stdout
    also_old = cli("demo", "--stream", "categorical", "--n", "40", "--seed", "3").stdout
    assert canonical == old == also_old
    assert len(canonical.splitlines()) == 40
    # the same events as the daemon's own --demo stream (run reads them by the same name)
    run = cli(
        "run", "--model", "CategoricalNB", "--demo", "categorical", "--limit", "40", "--seed", "3"
    )
    assert len(run.stdout.splitlines()) == 40
    # the old spellings stay out of the help
    shown = help_options("demo")
    assert {"--demo", "--limit", "--seed"} <= shown
    assert not {"--stream", "-n", "--n"} & shown, shown
    assert {"--demo", "--limit", "--seed", "--source"} <= help_options("run")


def test_eval_reads_its_events_from_source_and_keeps_input(tmp_path):
    (tmp_path / "in.jsonl").write_bytes(
        cli("demo", "--demo", "categorical", "--limit", "300").stdout
    )
    reports = []
    for flag in ("--source", "--input", "-i"):
        out = cli("eval", flag, tmp_path / "in.jsonl", "--model", "CategoricalNB")
        report = orjson.loads(out.stdout)
        report.pop("seconds", None)
        reports.append(report)
    assert reports[0] == reports[1] == reports[2]
    assert reports[0]["labelled"] == 300
    missing = cli("eval", "--model", "CategoricalNB", check=False)
    assert missing.returncode == 2
    assert b"--source (alias --input) is required" in missing.stderr
    # an unreadable source: the error names the flag by its canonical name
    unreadable = cli("eval", "--source", tmp_path / "nope.jsonl", check=False)
    assert unreadable.returncode == 2
    assert b"--source (alias --input): cannot open source file" in unreadable.stderr
    shown = help_options("eval")
    assert {"--source", "--limit", "--model"} <= shown
    assert not {"--input", "-i"} & shown, shown


@pytest.mark.parametrize(
    ("raw", "items"),
    [
        ("GaussianNB", ["GaussianNB"]),
        ("  GaussianNB   CategoricalNB ", ["GaussianNB", "CategoricalNB"]),
        ('CategoricalNB:{"alpha": 0.5}', ['CategoricalNB:{"alpha": 0.5}']),
        (
            'a={"x": [1, 2]} b="c d" c=[3, {"e": "} ]"}]',
            ['a={"x": [1, 2]}', 'b="c d"', 'c=[3, {"e": "} ]"}]'],
        ),
        ('k="a \\" b"', ['k="a \\" b"']),
        ("", []),
    ],
)
def test_environment_lists_split_outside_json(raw, items):
    assert split_env_list(raw) == items


def _eval_models(tmp_path, *args, env=None):
    out = cli("eval", "--source", tmp_path / "in.jsonl", *args, env=env)
    return orjson.loads(out.stdout)["models"]


def test_the_help_texts_own_environment_example_works(tmp_path):
    (tmp_path / "in.jsonl").write_bytes(
        cli("demo", "--demo", "categorical", "--limit", "200").stdout
    )
    models = _eval_models(tmp_path, env={"STREAM_NB_MODEL": 'CategoricalNB:{"alpha": 0.5}'})
    assert list(models) == ['CategoricalNB:{"alpha": 0.5}']
    assert "alpha=0.5" in models['CategoricalNB:{"alpha": 0.5}']["learner"]


def test_run_takes_the_model_spec_of_eval(tmp_path):
    """``run --model NAME:JSON`` (and the help's STREAM_NB_MODEL example) as ``eval``: the
    parameters on top of the daemon's bounds, next to --param; the class name in logs."""
    env = {"STREAM_NB_MODEL": 'CategoricalNB:{"alpha": 0.5}'}
    proc = cli("run", "--demo", "categorical", "--limit", "10", "--param", "fit_prior=false",
               "--checkpoint-dir", tmp_path / "env", env=env)  # fmt: skip
    assert "running CategoricalNB from demo:categorical" in proc.stderr.decode()
    params = orjson.loads(cli("inspect", "--snapshot", tmp_path / "env").stdout)["params"]
    assert params["alpha"] == 0.5 and params["fit_prior"] is False
    assert params["max_values_per_feature"] == 10_000  # the daemon's bound
    # a bound given in the spec replaces the daemon's, as --param would
    spec = 'CategoricalNB:{"max_values_per_feature": 3, "max_classes": null}'
    cli("run", "--model", spec, "--demo", "categorical", "--limit", "10",
        "--checkpoint-dir", tmp_path / "spec")  # fmt: skip
    params = orjson.loads(cli("inspect", "--snapshot", tmp_path / "spec").stdout)["params"]
    assert params["max_values_per_feature"] == 3 and params["max_classes"] is None
    assert params["max_features"] == 10_000 and params["alpha"] == 1.0


def test_a_repeatable_flag_on_the_command_line_replaces_its_environment_variable(tmp_path):
    (tmp_path / "in.jsonl").write_bytes(
        cli("demo", "--demo", "categorical", "--limit", "200").stdout
    )
    env = {"STREAM_NB_MODEL": "TAN NaiveBayes"}
    assert list(_eval_models(tmp_path, env=env)) == ["TAN", "NaiveBayes"]
    given = _eval_models(tmp_path, "--model", "CategoricalNB", "--model", "AODE", env=env)
    assert list(given) == ["CategoricalNB", "AODE"]
    # --param the same: the environment's items (JSON values, split outside JSON) ...
    env = {"STREAM_NB_PARAM": "alpha=0.5 fit_prior=false"}
    cli("run", "--model", "CategoricalNB", "--demo", "categorical", "--limit", "10",
        "--checkpoint-dir", tmp_path / "env", env=env)  # fmt: skip
    inspected = orjson.loads(cli("inspect", "--snapshot", tmp_path / "env").stdout)
    assert inspected["params"]["alpha"] == 0.5 and inspected["params"]["fit_prior"] is False
    # ... or the command line's value, not the environment's plus it
    out = cli(
        "run",
        "--model",
        "CategoricalNB",
        "--demo",
        "categorical",
        "--limit",
        "10",
        "--param",
        "alpha=2",
        "--checkpoint-dir",
        tmp_path / "ck",
        env={"STREAM_NB_PARAM": "alpha=0.5 fit_prior=false"},
    )
    assert out.returncode == 0
    inspected = orjson.loads(cli("inspect", "--snapshot", tmp_path / "ck").stdout)
    assert inspected["params"]["alpha"] == 2.0 and inspected["params"]["fit_prior"] is True


def with_a_broken_learner_module(tmp_path, argv):
    """``stream-nb ARGV`` in a process whose learner package has one broken module,
    found the way the CLI finds learners."""
    broken = tmp_path / "plugins"
    broken.mkdir()
    (broken / "brokennb.py").write_text("raise ImportError('needs libfoo 2.1, found 1.9')\n")
    script = textwrap.dedent(
        f"""
        import sys
        import stream_nb.seminaive as seminaive
        seminaive.__path__.append({str(broken)!r})
        from stream_nb.cli import main
        sys.exit(main({[str(a) for a in argv]!r}))
        """
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)


IMPORT_ERROR = "stream_nb.seminaive.brokennb failed to import: ImportError: needs libfoo 2.1"


def test_a_learner_module_that_fails_to_import_surfaces_its_error(tmp_path):
    argv = ["run", "--model", "BrokenNB", "--demo", "agrawal", "--limit", "1"]
    proc = with_a_broken_learner_module(tmp_path, argv)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "unknown learner 'BrokenNB'" in err
    assert IMPORT_ERROR in err
    assert Path(EXE).exists()


@pytest.mark.parametrize("command", ["inspect", "merge", "run"])
def test_a_snapshot_whose_learner_module_fails_to_import_names_the_error(tmp_path, command):
    state = CategoricalNB().to_state()
    state["learner"] = "BrokenNB"  # as a learner defined in the broken module would write it
    body = {
        "format": "stream-nb/engine", "created": 0.0, "learner": state, "source": None,
        "sink": None, "dead_letters": None, "evaluator": None, "delayed": None,
        "counters": None, "extra": {},
    }  # fmt: skip
    snapshot = tmp_path / "ck" / f"snapshot-{Checkpointer(tmp_path / 'ck').write(body)}.json"
    argv = {
        "inspect": ["inspect", "--snapshot", snapshot],
        "merge": ["merge", snapshot, "-o", tmp_path / "merged.snap"],
        "run": ["run", "--model", "CategoricalNB", "--initial-model", snapshot, "--demo",
                "agrawal", "--limit", "1"],
    }[command]  # fmt: skip
    proc = with_a_broken_learner_module(tmp_path, argv)
    err = proc.stderr.decode()
    assert proc.returncode == (2 if command == "run" else 1), err
    assert "unknown learner 'BrokenNB' in state" in err
    assert IMPORT_ERROR in err
