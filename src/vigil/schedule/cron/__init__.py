"""Scheduled jobs: what a job is (``jobs``) and when it runs (``schedule``, ``plan``), where its
answer goes (``delivery``), how jobs and their runs are stored and claimed (``repo``, ``runs``),
the loop that fires them (``scheduler``), their one-line texts (``format``) and errors."""
