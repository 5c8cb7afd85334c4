"""Browser tests: headless Chromium against a real server, on SQLite and on Postgres."""
