"""The contexts of the report pages: what each page shows, as typed objects, built in one place.
`pages/` decides what a page says (from the warehouse, where rca stored its results); `templates/`
draws it. Every word is written here: each context fills its own headline when given none, and
`context.entry()` is its report.json row (pages.index.ReportEntry); templates import the context
types only, never a builder, and nothing here imports templates.

Layout: one module per page, each with frozen dataclasses (every field typed and documented) and
one `build_<page>_context(...)` that reads the warehouse only through warehouse.queries (SQL in
warehouse/queries/*.sql) or lays out an rca result:

  incident.py    IncidentContext    build_incident_context(db_path, run_id)
  nightly.py     NightlyContext     build_nightly_context(db_path, run_id),
                                    build_replay_context(db_path, run_id, original_run_id, verdicts)
  sweep.py       SweepContext       build_sweep_context(db_path, run_id, temperatures, penalties, cells)
  evaluation.py  EvaluationContext  build_evaluation_context(evaluate_result, run_header)
  capacity.py    CapacityContext    build_capacity_context(db_path, sweep_id, reports_root, out_dir)
  compare.py     CompareContext     build_compare_context(db_path, run_a, run_b, verdicts, reports_root, out_dir)
  index.py       IndexContext       build_index_context(reports_root)  (from the report.json files)

Shared pieces, written once: run_header.py (the header every page starts with, one query),
fields.py (finite numbers, UTC ISO times, relative links, ContextError naming its field), and
from_mapping.py (a typed context from plain data, e.g. test fixtures or JSON).

Why typed: a constructor validates its own fields (a share in [0, 1], a spike that ends after it
starts, a link without a scheme), so a context that reaches templates/render.py is right by
construction and nothing re-checks it at render time. Templates read attributes (`ctx.run.engine`).

Adding a page: write `pages/<page>.py` with its dataclasses and `build_<page>_context`; put its
SQL in warehouse/queries/<name>.sql (one query a file, a chain of CTEs) and read it with
`query(conn, "<name>", ...)`; use RunHeader/read_run_header for the header; add a
`render_<page>(context: <Page>Context, out_dir, ...)` in templates/render.py with its template,
an `entry()` on the context and the page's kind in index.RUN_KINDS if it writes a report.json.
What needs analysis is computed in rca and stored with the run (e.g. rca/findings.py), not here. Test the builder against a
warehouse from tests/support/runbuilder.py in tests/pages/test_<page>.py.
"""
