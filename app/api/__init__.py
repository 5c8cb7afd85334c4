"""The versioned JSON API (/api/v1) for a team's pipeline: tokens, pushes and pulls."""
