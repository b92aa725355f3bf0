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
