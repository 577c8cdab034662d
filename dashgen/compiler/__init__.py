"""The compiler: a project's definitions (panels/, alerts/) -> the files in rendered/.

`project.compile_project` loads every definition module once and compiles it into the typed
project of `compiled.py` (rule files, alerts, recordings, step statistics, dashboards,
inhibitions, routing); `build` runs one renderer per artefact (`targets/`) over it. The
commands that need the alerts or dashboards (list, test, preview, backtest, review) read the
compiled project, never the rendered text.
"""
