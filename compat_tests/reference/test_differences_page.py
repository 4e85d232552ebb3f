"""docs/kafka-differences.md itself, and the comparison that checks observations against it."""

from __future__ import annotations

from compat_tests.reference.diff import DOC, differences, load_known, normalise


def test_every_row_is_kept_with_a_reason_or_fixed() -> None:
    rows = load_known()
    assert rows, f"{DOC} has no table rows"
    bad = [
        f"{r.scenario} {r.field}: {r.status!r}"
        for r in rows.values()
        if r.status not in ("kept", "fixed") or (r.status == "kept" and not r.reason)
    ]
    assert not bad, "rows neither fixed nor kept with a reason:\n  " + "\n  ".join(bad)


def test_comparison_masks_what_legitimately_differs_and_nothing_else() -> None:
    ours = {
        "throttle_time_ms": 0,
        "cluster_id": "abc",
        "topics": [
            {"name": "ref_data_0123abcd", "error_code": 0, "partitions": [{"partition_index": 1}]},
            {"name": "ref_new_89abcdef", "error_code": 3},
        ],
    }
    theirs = {
        "throttle_time_ms": 7,
        "cluster_id": "xyz",
        "topics": [
            {"name": "ref_new_00000000", "error_code": 36},
            {"name": "ref_data_ffffffff", "error_code": 0, "partitions": [{"partition_index": 1}]},
        ],
    }
    assert differences(normalise(ours), normalise(theirs)) == [
        ("topics[name=<new>].error_code", 3, 36)
    ]
