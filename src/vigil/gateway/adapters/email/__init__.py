"""The Email adapter (no extra to install: SMTP is Python's own): see :mod:`.adapter`.

Setting it up: give the agent a mail address, create an app password for it at the mail
provider, put the password in an environment variable (never in config.yaml), and in
config.yaml::

    email:
      enabled: true
      address: agent@example.com                # the agent's own address (From)
      smtp_url: smtps://smtp.example.com:465    # or smtp://HOST:587 (STARTTLS when offered)
      password_env: VIGIL_EMAIL_PASSWORD        # the variable holding the app password
      imap_url: imaps://imap.example.com:993    # to receive too (unset: send-only)
      allow: [me@example.com]                   # who is answered (others get a pairing code)

``vigil gateway run`` then sends cron answers (``vigil cron add ... --deliver
email:me@example.com``) as mails and, with ``imap_url``, answers mail in its thread.
"""

from typing import Any

from vigil.gateway.adapters.email.adapter import EmailAdapter


def create(settings: Any) -> EmailAdapter:
    """The adapter for a profile's settings (the platform registry's factory); it reads its
    section when it starts and on SIGHUP."""
    return EmailAdapter()


__all__ = ["EmailAdapter", "create"]
