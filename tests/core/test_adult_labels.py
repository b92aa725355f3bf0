"""The labels of the shipped Adult domain are established, not guessed.

Expected numbers: the category frequencies of UCI Adult (adult.data + adult.test, 48,842 records),
each value listed in the order of UCI's ``adult.names`` with the missing value "?" last — typed
here from the coordinator's check against the published frequencies, not computed by dpmatrix.
The shipped file is read with pandas alone; code ``i`` of an attribute must have exactly the count
of the ``i``-th label of ``adult-domain.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

DATA = Path(__file__).resolve().parents[2] / "src" / "dpmatrix" / "data"

# attribute -> [(label, records)] in code order (UCI adult.names order, "?" last)
UCI_FREQUENCIES = {
    'workclass': [('Private', 33906), ('Self-emp-not-inc', 3862), ('Self-emp-inc', 1695), ('Federal-gov', 1432), ('Local-gov', 3136), ('State-gov', 1981), ('Without-pay', 21), ('Never-worked', 10), ('?', 2799)],
    'education-num': [('Preschool', 83), ('1st-4th', 247), ('5th-6th', 509), ('7th-8th', 955), ('9th', 756), ('10th', 1389), ('11th', 1812), ('12th', 657), ('HS-grad', 15784), ('Some-college', 10878), ('Assoc-voc', 2061), ('Assoc-acdm', 1601), ('Bachelors', 8025), ('Masters', 2657), ('Prof-school', 834), ('Doctorate', 594)],
    'marital-status': [('Married-civ-spouse', 22379), ('Divorced', 6633), ('Never-married', 16117), ('Separated', 1530), ('Widowed', 1518), ('Married-spouse-absent', 628), ('Married-AF-spouse', 37)],
    'occupation': [('Tech-support', 1446), ('Craft-repair', 6112), ('Other-service', 4923), ('Sales', 5504), ('Exec-managerial', 6086), ('Prof-specialty', 6172), ('Handlers-cleaners', 2072), ('Machine-op-inspct', 3022), ('Adm-clerical', 5611), ('Farming-fishing', 1490), ('Transport-moving', 2355), ('Priv-house-serv', 242), ('Protective-serv', 983), ('Armed-Forces', 15), ('?', 2809)],
    'relationship': [('Wife', 2331), ('Own-child', 7581), ('Husband', 19716), ('Not-in-family', 12583), ('Other-relative', 1506), ('Unmarried', 5125)],
    'race': [('White', 41762), ('Asian-Pac-Islander', 1519), ('Amer-Indian-Eskimo', 470), ('Other', 406), ('Black', 4685)],
    'sex': [('Female', 16192), ('Male', 32650)],
    'native-country': [('United-States', 43832), ('Cambodia', 28), ('England', 127), ('Puerto-Rico', 184), ('Canada', 182), ('Germany', 206), ('Outlying-US(Guam-USVI-etc)', 23), ('India', 151), ('Japan', 92), ('Greece', 49), ('South', 115), ('China', 122), ('Cuba', 138), ('Iran', 59), ('Honduras', 20), ('Philippines', 295), ('Italy', 105), ('Poland', 87), ('Jamaica', 106), ('Vietnam', 86), ('Mexico', 951), ('Portugal', 67), ('Ireland', 37), ('France', 38), ('Dominican-Republic', 103), ('Laos', 23), ('Ecuador', 45), ('Taiwan', 65), ('Haiti', 75), ('Columbia', 85), ('Hungary', 19), ('Guatemala', 88), ('Nicaragua', 49), ('Scotland', 21), ('Thailand', 30), ('Yugoslavia', 23), ('El-Salvador', 155), ('Trinadad&Tobago', 27), ('Peru', 46), ('Hong', 30), ('Holand-Netherlands', 1), ('?', 857)],
    'income>50K': [('<=50K', 37155), ('>50K', 11687)],
}


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return pd.read_csv(DATA / "adult.csv")


@pytest.fixture(scope="module")
def domain_spec() -> dict:
    return json.loads((DATA / "adult-domain.json").read_text())


def test_adult_has_48842_records(adult):
    assert len(adult) == 48842


@pytest.mark.parametrize("attr", sorted(UCI_FREQUENCIES))
def test_labels_are_uci_names_order(attr, domain_spec):
    assert domain_spec[attr]["labels"] == [label for label, _ in UCI_FREQUENCIES[attr]]


@pytest.mark.parametrize("attr", sorted(UCI_FREQUENCIES))
def test_every_category_count_matches_uci(attr, adult):
    expected = [n for _, n in UCI_FREQUENCIES[attr]]
    counts = adult[attr].value_counts().reindex(range(len(expected)), fill_value=0).tolist()
    assert counts == expected
    assert sum(expected) == 48842


def test_sex_code_0_is_female_not_first_appearance(adult, domain_spec):
    # the first record of adult.data is a man, yet code 0 holds the 16,192 women
    assert domain_spec["sex"]["labels"][0] == "Female"
    assert int((adult["sex"] == 0).sum()) == 16192


def test_unestablished_attributes_stay_codes(domain_spec):
    # age, hours-per-week: only a few counts support an offset; fnlwgt, capital-gain/-loss: the
    # binning is undocumented -> no labels; their codes are bins in increasing order -> ordinal
    for attr, size in [("age", 85), ("fnlwgt", 100), ("capital-gain", 100),
                       ("capital-loss", 100), ("hours-per-week", 99)]:
        assert domain_spec[attr] == {"size": size, "kind": "ordinal"}
