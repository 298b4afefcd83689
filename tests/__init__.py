"""spikelens' tests, a package so that test and bench code import the shared builders as
`tests.support.<module>` (pytest puts the repository root on sys.path: `pythonpath` in
pyproject.toml)."""
