"""Command-line conventions: an option typo is answered with the subcommand's usage and the
nearest option names; an existing output file is never replaced without --overwrite; --seed has
one meaning (seeded, not private noise) and synth's sampler seed is --sample-seed; progress bars
never go into a log file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.cli import main

ADULT = Path(dm.__file__).parent / "data" / "adult.csv"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    data = pd.read_csv(ADULT, usecols=["sex", "race", "income>50K"]).head(3000)
    dom = dm.Domain.from_dict({"sex": 2, "race": 5, "income>50K": 2})
    meas = dm.plan(dm.Workload.marginals(dom, 2, upto=True), rho=0.5).measure(data, rng=np.random.default_rng(1))
    return dm.write_release(meas, tmp_path_factory.mktemp("conv") / "rel")


@pytest.mark.parametrize("argv, usage, hint", [
    (["release", "data.csv", "--worklaod", "all"], "usage: dpmatrix release", "did you mean --workload"),
    (["query", "REL", "--marginl", "a"], "usage: dpmatrix query", "did you mean --marginal"),
    (["synth", "REL", "--out", "x.csv", "--rowz", "3"], "usage: dpmatrix synth", "did you mean --rows"),
])
def test_option_typo_gets_the_subcommand_usage_and_a_suggestion(capsys, argv, usage, hint):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert usage in err and hint in err
    assert "required" not in err  # the typo is named first, not a missing option it hides


def test_report_out_file_is_not_replaced_without_overwrite(release, tmp_path, capsys):
    page = tmp_path / "r.html"
    page.write_text("mine")
    assert main(["report", str(release), "--out", str(page), "--quiet"]) == 2
    assert page.read_text() == "mine" and "--overwrite" in capsys.readouterr().err
    assert main(["report", str(release), "--out", str(page), "--quiet", "--overwrite"]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_seed_has_one_meaning(release, tmp_path, capsys):
    assert main(["synth", str(release), "--out", str(tmp_path / "s.csv"), "--seed", "3", "--quiet"]) == 2
    assert "NOT private" in capsys.readouterr().err
    assert not (tmp_path / "s.csv").exists()


def test_no_progress_bars_in_a_log_file(release, tmp_path, capsys):
    """stderr captured (not a terminal): the post-processing writes its messages, no bars."""
    assert main(["postprocess", str(release), "--out", str(tmp_path / "pp"), "--iters", "20"]) == 0
    out, err = capsys.readouterr()
    assert "post-processing" in out
    assert "it/s" not in err and "\r" not in err
