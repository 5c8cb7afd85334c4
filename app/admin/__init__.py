"""The admin side: the dashboard, agreement between labelers, people, QC, imports, the PRM."""
