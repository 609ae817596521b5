"""A class in a lecture: join codes, the room's votes, a class-sourced sweep (rules: pure; store:
the run store's tables)."""
