"""A misspelt command gets the nearest command names, in one line, exit status 2."""

from __future__ import annotations

import pytest

from dpmatrix.cli import main


@pytest.mark.parametrize(("typo", "meant"), [("releas", "release"), ("quer", "query"), ("postproces", "postprocess"),
                                             ("infer-domian", "infer-domain")])
def test_misspelt_command_suggests_the_nearest(capsys, typo, meant):
    with pytest.raises(SystemExit) as exc:
        main([typo, "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"dpmatrix: error: unknown command {typo!r} (did you mean {meant}?)"


def test_unrelated_word_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["zzz"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'zzz'" in err and "'release'" in err and "did you mean" not in err


def test_top_level_options_before_the_command_are_skipped(capsys):
    with pytest.raises(SystemExit):
        main(["--debug", "qurey", "x"])
    assert "did you mean query?" in capsys.readouterr().err


def _parsers(parser):
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_no_parser_of_the_command_line_takes_option_prefixes():
    from dpmatrix.cli import build_parser

    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 10  # dpmatrix, each command, each ledger action
    assert [p.prog for p in parsers if p.allow_abbrev] == []


@pytest.mark.parametrize(
    ("option", "meant"),
    [("--overwrit", "--overwrite"), ("--overwrit=1", "--overwrite"), ("--sav", "--save"), ("--form", "--format")],
)
def test_an_option_prefix_is_refused_with_the_whole_name(capsys, tmp_path, option, meant):
    """``--overwrit`` once worked silently as ``--overwrite`` (argparse's prefix matching): now
    it is an unknown option, one line naming the whole option, exit status 2, nothing written."""
    (tmp_path / "d.json").write_text('{"a": 3, "b": 2}')
    args = ["plan", "--domain", str(tmp_path / "d.json"), "-w", "a,b", "--rho", "1"]
    extra = {"--sav": ["--sav", str(tmp_path / "p.json")], "--form": ["--form", "json"]}.get(option, [option])
    with pytest.raises(SystemExit) as exc:
        main([*args, *extra])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    name = option.split("=")[0]
    assert err.startswith(f"dpmatrix plan: error: unrecognized option {name} (did you mean {meant}")
    assert list(tmp_path.iterdir()) == [tmp_path / "d.json"]
    assert main([*args, "--save", str(tmp_path / "p.json"), "--overwrite", "--format", "csv"]) == 0  # whole names


def test_a_ledger_action_option_prefix_is_refused(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["ledger", "show", "--ledger", str(tmp_path / "l.sqlite3"), "--al"])
    assert exc.value.code == 2
    assert "unrecognized option --al (did you mean --all" in capsys.readouterr().err
