"""A local Telegram Bot API for tests and benchmarks (:class:`server.FakeTelegramServer`)."""
