"""Developer scripts; a package so the tests can import their functions."""
