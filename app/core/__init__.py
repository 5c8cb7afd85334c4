"""Plumbing: settings, the database, migrations, CSRF and the HTTP middleware."""
