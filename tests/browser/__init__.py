"""Browser tests: headless Chromium against a real server, on SQLite; the few whose page
must behave differently on Postgres (``both_backends``) on Postgres too."""
