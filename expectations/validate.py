"""Running a suite through Great Expectations: a file context in the run folder (so its Data Docs
live there), one Spark data asset per kind of data, one checkpoint per suite, and the results
turned into ExpectationOutcomes with a sample of the rows that break each rule.

Data Docs keep every check's pages: a check renders its own (its validation results and the
suites it ran) and the index, not the whole site again, so a check's Data Docs cost little more
on the hundredth run of a query than on the first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import great_expectations as gx
from great_expectations.core.expectation_suite import ExpectationSuite
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier
from great_expectations.util import convert_to_json_serializable
from pyspark.sql import DataFrame

from expectations.report.model import ExpectationOutcome
from expectations.suites import SuiteSpec

DATA_DOCS = "gx/uncommitted/data_docs/local_site/index.html"  # relative to the run folder
SOURCE = "lockstep"  # the context's one data source: Spark, the frames handed to it at validation


def gx_context(run_folder: Path):
    context = gx.get_context(mode="file", project_root_dir=str(run_folder))
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


@dataclass(frozen=True)
class Validated:
    outcomes: list[ExpectationOutcome]
    pages: tuple  # the Data Docs pages it adds or changes: its validation result's, its suite's


def validate(context, spec: SuiteSpec, frame: DataFrame, parameters: dict, sample_rows: int) -> Validated:
    """Run one suite on `frame`; `parameters` fill the suite's $PARAMETERs (e.g. batch_rows)."""
    definition = _whole_frame(context, spec.asset)
    suite = context.suites.add_or_update(ExpectationSuite(name=spec.name, expectations=list(spec.expectations)))
    validation = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=spec.name, data=definition, suite=suite)
    )
    checkpoint = context.checkpoints.add_or_update(
        gx.Checkpoint(
            name=spec.name, validation_definitions=[validation], result_format={"result_format": "COMPLETE"}, actions=[]
        )
    )  # Data Docs are built once, after the last suite
    result = checkpoint.run(batch_parameters={"dataframe": frame}, expectation_parameters=parameters)
    outcomes = [
        _outcome(spec.name, convert_to_json_serializable(item.to_json_dict()), sample_rows)
        for run in result.run_results.values()
        for item in run.results
    ]
    return Validated(outcomes, (*result.run_results, ExpectationSuiteIdentifier(name=spec.name)))


def _whole_frame(context, asset_name: str):
    """The batch definition "whole" of the Spark data asset `asset_name`, each part added to the
    context only when it is missing: every addition rewrites great_expectations.yml (about 0.1 s
    a time), and a check validates four or five suites. (Read back from the file, an asset is
    tied to its data source, and so to the context, only when fetched by get_asset.)

    The data source does not persist what it validates: check.py caches the frames worth
    caching, and Great Expectations' own persist would cache the ordered change feed, nested
    images and all (2 s at 1.34 M changes), where scanning its file once per rule costs less."""
    try:
        source = context.data_sources.get(SOURCE)
    except KeyError:
        source = None
    if source is None or source.persist:  # a run folder's context from before persist=False
        source = context.data_sources.add_or_update_spark(SOURCE, persist=False)
    try:
        asset = source.get_asset(asset_name)
    except LookupError:
        asset = source.add_dataframe_asset(asset_name)
    try:
        return asset.get_batch_definition("whole")
    except KeyError:
        return asset.add_batch_definition_whole_dataframe("whole")


def build_data_docs(context, pages: list) -> None:
    """Render `pages` and the index. (Given no pages, GX renders every result it has stored
    again: a cost that grows with each check the run folder has had.)"""
    if pages:
        context.build_data_docs(resource_identifiers=pages)


def _outcome(suite: str, result: dict, sample_rows: int) -> ExpectationOutcome:
    details = result.get("result") or {}
    observed = details.get("observed_value")
    rows = (details.get("details") or {}).get("unexpected_rows") or []
    # Only the unexpected-rows expectations observe a count of offending rows.
    counts_rows = "unexpected_rows_query" in result["expectation_config"]["kwargs"]
    unexpected = observed if counts_rows and isinstance(observed, int) else None
    if result.get("exception_info", {}).get("raised_exception"):
        rows = [{"exception": result["exception_info"]["exception_message"]}]
    return ExpectationOutcome(
        suite,
        result["expectation_config"]["type"],
        bool(result["success"]),
        unexpected,
        tuple(dict(r) for r in rows[:sample_rows]),
    )
