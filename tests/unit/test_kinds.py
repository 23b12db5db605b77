from jobs.changelog.kinds import ALL_KINDS, INSERT_ONLY, UPSERT, ChangelogMode, RowKind


def test_weights_add_for_insert_and_update_after_and_subtract_for_retractions():
    assert [RowKind.from_short(s).weight for s in ("+I", "-U", "+U", "-D")] == [1, -1, 1, -1]


def test_short_names_round_trip():
    for kind in RowKind:
        assert RowKind.from_short(kind.short) is kind


def test_changelog_modes_print_in_flink_notation_and_kind_order():
    assert str(INSERT_ONLY) == "[I]"
    assert str(UPSERT) == "[I,UA,D]"
    assert str(ALL_KINDS) == "[I,UB,UA,D]"
    assert str(ChangelogMode({RowKind.UPDATE_AFTER, RowKind.INSERT})) == "[I,UA]"
