"""Who is asking: passwords and users, logins and sessions, throttling, API tokens."""
