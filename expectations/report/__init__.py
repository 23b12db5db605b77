"""The HTML data-quality report: one self-contained page per check run, and an index of runs.

runs.py finds run folders and reads report.json; charts.py draws the micro-batch charts as
inline SVG; page.py and index.py turn reports into HTML; publish.py writes them atomically.
"""

from expectations.report.index import render_index
from expectations.report.page import render_page
from expectations.report.publish import publish, rebuild

__all__ = ["publish", "rebuild", "render_index", "render_page"]
