"""The int8/fp32 decision, from injected timings: which model, when it is measured, what is kept."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from retrieval_server.backends.model_choice import CHUNKS, QUERIES, How, ModelChoice, Precision, Timings, decide, measure

INT8_FASTER = Timings(int8_ms=80.0, fp32_ms=100.0, fp32_over_int8=1.25, rounds=5, texts_per_round=8)
FP32_FASTER = Timings(int8_ms=100.0, fp32_ms=80.0, fp32_over_int8=0.8, rounds=5, texts_per_round=8)


def test_the_faster_model_wins_and_a_tie_keeps_int8() -> None:
    assert INT8_FASTER.faster() is Precision.INT8 and FP32_FASTER.faster() is Precision.FP32
    assert Timings(90.0, 90.0, 1.0, 5, 8).faster() is Precision.INT8
    # The round-by-round ratio decides, not the medians of each model's own rounds.
    assert Timings(int8_ms=100.0, fp32_ms=90.0, fp32_over_int8=1.05, rounds=5, texts_per_round=8).faster() is Precision.INT8


def test_only_a_clear_difference_is_decisive() -> None:
    assert INT8_FASTER.decisive() and FP32_FASTER.decisive()
    for ratio in (0.95, 1.0, 1.05):
        assert not Timings(90.0, 90.0 * ratio, ratio, 5, 8).decisive()


def test_a_new_index_measures_when_both_models_are_installed() -> None:
    assert decide("auto", None, fp32_installed=True, read_only=False) is None


def test_without_the_fp32_package_a_new_index_takes_int8_unmeasured() -> None:
    assert decide("auto", None, fp32_installed=False, read_only=False) == ModelChoice(Precision.INT8, How.ONLY_INT8)


def test_a_read_only_server_does_not_measure_what_it_cannot_record() -> None:
    assert decide("auto", None, fp32_installed=True, read_only=True) == ModelChoice(Precision.INT8, How.UNRECORDED)


def test_a_measured_choice_is_kept_for_the_index_life() -> None:
    recorded = ModelChoice(Precision.FP32, How.MEASURED, FP32_FASTER)
    assert decide("auto", recorded, fp32_installed=True, read_only=False) is recorded
    assert decide("auto", recorded, fp32_installed=True, read_only=True) is recorded


@pytest.mark.parametrize("how", [How.ONLY_INT8, How.SEVERAL_PROCESSES, How.FP32_UNBUILDABLE, How.RECORDED])
def test_an_unmeasured_choice_is_kept_too(how: How) -> None:
    # Even by an index without documents: the process that recorded it may be embedding its first
    # ones, and a new measurement could pick the other model for the same index.
    recorded = ModelChoice(Precision.INT8, how)
    assert decide("auto", recorded, fp32_installed=True, read_only=False) is recorded


def test_forcing_overrides_auto_and_keeps_the_numbers_of_the_same_model() -> None:
    assert decide("fp32", None, fp32_installed=True, read_only=False) == ModelChoice(Precision.FP32, How.FORCED)
    measured = ModelChoice(Precision.INT8, How.MEASURED, INT8_FASTER)
    assert decide("int8", measured, fp32_installed=True, read_only=False) is measured
    # A different forced model is returned as asked: the model check then refuses to start.
    assert decide("fp32", measured, fp32_installed=True, read_only=False) == ModelChoice(Precision.FP32, How.FORCED)


def test_the_recorded_choice_round_trips_through_json() -> None:
    for choice in (ModelChoice(Precision.FP32, How.MEASURED, FP32_FASTER), ModelChoice(Precision.INT8, How.FORCED)):
        assert ModelChoice.from_json(choice.to_json()) == choice
    assert "fp32/int8 0.80" in ModelChoice(Precision.FP32, How.MEASURED, FP32_FASTER).describe()


def test_measurement_does_fixed_interleaved_work_on_both_models() -> None:
    calls: list[tuple[Precision, int]] = []

    def encoder(p: Precision):  # type: ignore[no-untyped-def]
        def encode(texts: Sequence[str]) -> None:
            calls.append((p, len(texts)))

        return encode

    t = measure({p: encoder(p) for p in Precision}, rounds=3)
    assert t.rounds == 3 and t.texts_per_round == len(CHUNKS) + len(QUERIES)
    per_round = 1 + len(QUERIES)  # the chunk batch, then each query alone
    assert len(calls) == 2 * 4 * per_round  # a warm-up round and 3 measured, per model
    firsts = [calls[i][0] for i in range(0, len(calls), per_round)]
    assert firsts == [Precision.INT8, Precision.FP32, Precision.FP32, Precision.INT8] * 2
    assert {n for _, n in calls} == {len(CHUNKS), 1}


def test_each_round_compares_the_two_models_back_to_back() -> None:
    """A fake clock: fp32 costs 0.8 of int8, and the machine's load triples in the middle rounds."""
    now = [0.0]
    load = iter([1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1])  # per (round, model) in the order they run

    def encoder(cost_ms: float):  # type: ignore[no-untyped-def]
        def encode(texts: Sequence[str]) -> None:
            if len(texts) > 1:  # the chunk batch opens a round: the load of that round applies to it all
                encode.factor = next(load)  # type: ignore[attr-defined]
            now[0] += cost_ms * encode.factor / 1000  # type: ignore[attr-defined]

        encode.factor = 1  # type: ignore[attr-defined]
        return encode

    t = measure({Precision.INT8: encoder(10.0), Precision.FP32: encoder(8.0)}, rounds=5, clock=lambda: now[0])
    assert t.fp32_over_int8 == pytest.approx(0.8)
    assert t.int8_ms == pytest.approx(10.0 * 5) and t.fp32_ms == pytest.approx(8.0 * 5)
    assert t.faster() is Precision.FP32


def test_workers_of_several_processes_do_not_measure_each_on_their_own() -> None:
    assert decide("auto", None, fp32_installed=True, read_only=False, several_processes=True) == \
        ModelChoice(Precision.INT8, How.SEVERAL_PROCESSES)
    measured = ModelChoice(Precision.FP32, How.MEASURED, Timings(10.0, 8.0, 0.8, 5, 8))
    assert decide("auto", measured, fp32_installed=True, read_only=False, several_processes=True) is measured
