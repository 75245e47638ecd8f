"""ledgercheck's code generation: Jinja templates that turn counterexamples into pytest
cases, the renderer that writes `generated_tests/`, and the pytest plugin they run under."""
