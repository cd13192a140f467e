"""Several gateways on one PostgreSQL store: who runs which conversation (ownership, claims),
handing conversations over when a worker leaves or dies, relaying live events to the worker a
page is connected to, and the leases that keep a single-receiver platform (a bot that
polls for its updates) on one worker."""
