"""pflrepro.reporting.ordering: the order and display labels of table and figure ids."""

import pytest

from pflrepro.reporting.ordering import (
    check_labels,
    display_labels,
    natural_key,
    order_values,
)


def test_natural_order_puts_numbers_by_value() -> None:
    names = ["groups10", "groups2", "alpha0.5", "groups1"]
    assert sorted(names, key=natural_key) == ["alpha0.5", "groups1", "groups2", "groups10"]


def test_order_values_listed_first_then_the_rest_naturally() -> None:
    found = ["fedavg", "m10", "m2", "federico"]
    assert order_values(found, None, "t") == ["fedavg", "federico", "m2", "m10"]
    assert order_values(found, ["m10", "fedavg"], "t") == ["m10", "fedavg", "federico", "m2"]
    with pytest.raises(ValueError, match=r"t: \['nope'\] requested but not in the aggregate"):
        order_values(found, ["nope"], "t")
    with pytest.raises(ValueError, match="listed twice"):
        order_values(found, ["m2", "m2"], "t")
    with pytest.raises(ValueError, match="the string 'm2'"):
        order_values(found, "m2", "t")


def test_labels_show_ids_as_given_or_as_themselves_never_alike() -> None:
    assert check_labels(None, "t") == {}
    assert display_labels(["a", "b"], {"a": "A"}, "t") == {"a": "A", "b": "b"}
    with pytest.raises(ValueError, match="'a' and 'b' would both be shown as 'b'"):
        display_labels(["a", "b"], {"a": "b"}, "t")
    with pytest.raises(ValueError, match="non-empty strings"):
        check_labels({"a": " "}, "t")
    with pytest.raises(ValueError, match="expected a mapping"):
        check_labels(["a"], "t")  # type: ignore[arg-type]
