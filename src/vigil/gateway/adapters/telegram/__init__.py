"""The Telegram adapter (``pip install 'vigil[telegram]'``): see :mod:`.adapter`."""

from vigil.gateway.adapters.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
