"""Parts of bench/gateway_load.py: the gateway process, the Telegram side, the store audit and the report."""
