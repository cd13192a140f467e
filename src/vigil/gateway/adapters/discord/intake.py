"""What comes in from Discord — messages, ``/vigil …``, button presses — handed to the gateway.

A message for the agent (:mod:`.inbound` decides which) is stored by
:meth:`GatewayPort.receive` with its message id as the external id, so a redelivery (a
resumed session replaying it) is answered once. A mention in a channel first gets its thread
(made once: a redelivery finds it made); where no thread can be made the conversation stays in
the channel. Someone not allowed to talk to the agent is answered in a DM with a pairing code
(in the channel where no DM can be opened), with no thread made and no file fetched.
``/vigil …`` is stored, then acknowledged (Discord's "thinking…", within its three seconds);
its answer replaces that.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import TYPE_CHECKING

import discord

from vigil.gateway.adapters.base import GatewayClosed, Inbound
from vigil.gateway.adapters.discord import inbound as routing
from vigil.gateway.adapters.discord.files import attach
from vigil.gateway.adapters.discord.inbound import NAME
from vigil.gateway.adapters.discord.send import call
from vigil.gateway.adapters.saved_files import conversation_directory
from vigil.store.gateway.gateway_tables import RouteKey

if TYPE_CHECKING:
    from vigil.gateway.adapters.discord.adapter import DiscordAdapter

log = logging.getLogger(__name__)

THREAD_EXISTS = 160004
STALE = datetime.timedelta(seconds=3)
"""An interaction older than this cannot be responded to."""
INTERACTION_LIFE = 14 * 60.0
"""Seconds a ``/vigil …`` is answered through its interaction (Discord takes 15 minutes)."""


async def on_message(adapter: "DiscordAdapter", message: discord.Message) -> None:
    """One message: stored before this returns when it is for the agent."""
    gateway, bot = adapter.gateway, adapter.bot
    if gateway is None or bot is None or bot.user is None:
        return
    is_thread, parent = await _place(bot, message.channel)
    found = routing.candidate(message, bot.user.id, parent=parent, is_thread=is_thread,
                              threads=adapter.settings.threads)
    key = str(message.id)
    if found is None or key in adapter.seen or key in adapter.in_flight:
        return
    route, user = found.route, found.user
    if found.needs_route and await asyncio.to_thread(gateway.store.gateway.route_get, route) is None:
        return
    adapter.in_flight.add(key)
    try:
        allowed = await gateway.may_talk(NAME, user)
        if not allowed and not found.dm:
            route = await _dm(message.author) or RouteKey(NAME, route.chat, "" if found.start_thread else route.thread, user)
        elif found.start_thread:
            route = await _thread(message, route, found.text)
        text = found.text
        if found.attachments and allowed:
            text = await _with_files(adapter, route, found.attachments, text)
        if text:
            await gateway.receive(Inbound(route, key, text, sender=user,
                                          meta={"sender_name": message.author.display_name}))
    finally:
        adapter.in_flight.discard(key)
    adapter.remember(key)
    adapter.last_route[(route.chat, user)] = route


async def _place(bot: discord.Client, channel: object) -> tuple[bool, int | None]:
    """Whether ``channel`` is a thread, and its parent channel (one not in the cache is asked for)."""
    if isinstance(channel, discord.Thread):
        return True, channel.parent_id
    if isinstance(channel, discord.PartialMessageable) and channel.guild_id is not None:
        try:
            fetched = await bot.fetch_channel(channel.id)
        except (discord.HTTPException, discord.InvalidData) as exc:
            log.warning("Discord: cannot tell what channel %s is: %s", channel.id, exc)
            return False, None
        if isinstance(fetched, discord.Thread):
            return True, fetched.parent_id
    return False, None


async def _thread(message: discord.Message, route: RouteKey, text: str) -> RouteKey:
    """The conversation's thread on ``message`` (its id is the message's); the channel itself
    where Discord does not let the bot make one."""
    try:
        await message.create_thread(name=routing.thread_name(text), auto_archive_duration=1440)
    except discord.HTTPException as exc:
        if exc.code != THREAD_EXISTS:
            log.warning("Discord: no thread for a conversation in %s (answering in the channel): %s", route.chat, exc)
            return RouteKey(NAME, route.chat, "", route.user)
    return route


async def _dm(user: discord.abc.User) -> RouteKey | None:
    """The route of ``user``'s DM with the bot (where a pairing code goes), if one opens."""
    try:
        channel = await user.create_dm()
    except discord.HTTPException as exc:
        log.info("Discord: cannot open a DM with %s: %s", user.id, exc)
        return None
    return RouteKey(NAME, str(channel.id), "", str(user.id))


async def _with_files(adapter: "DiscordAdapter", route: RouteKey, attachments: list[discord.Attachment],
                      text: str) -> str:
    gateway = adapter.gateway
    assert gateway is not None
    directory = await conversation_directory(gateway, route)
    return await attach(attachments, directory, text, max_bytes=gateway.settings.gateway.upload_max_bytes,
                        api_url=adapter.settings.api_url)


async def on_command(adapter: "DiscordAdapter", interaction: discord.Interaction, text: str | None) -> None:
    """``/vigil …``: the command goes to the conversation of the place it was run in (in a
    channel: the person's last conversation there, else their own in the channel)."""
    gateway = adapter.gateway
    user, channel_id = str(interaction.user.id), str(interaction.channel_id or "")
    if gateway is None or not channel_id:
        await _note(interaction, "vigil is not running.")
        return
    channel = interaction.channel
    if interaction.guild_id is None:
        route = RouteKey(NAME, channel_id, "", user)
    elif isinstance(channel, discord.Thread) and channel.parent_id is not None:
        route = RouteKey(NAME, str(channel.parent_id), channel_id, user)
    else:
        route = adapter.last_route.get((channel_id, user)) or RouteKey(NAME, channel_id, "", user)
    if interaction.guild_id is not None and not await gateway.may_talk(NAME, user):
        route = await _dm(interaction.user) or route
    key = f"interaction:{interaction.id}"
    try:
        receipt = await gateway.receive(Inbound(route, key, routing.command_text(text), sender=user,
                                                meta={"sender_name": interaction.user.display_name}))
    except GatewayClosed:
        await _note(interaction, "vigil is restarting: try again in a moment.")
        return
    if discord.utils.utcnow() - discord.utils.snowflake_time(interaction.id) > STALE:
        return  # replayed after a resume: Discord takes no response to it any more (the answer goes to the channel)
    if receipt.denied:
        await _note(interaction, "You cannot talk to this agent yet: your pairing code is on its way in a DM.")
        return
    try:
        await call(interaction.response.defer(ephemeral=True, thinking=True), "interaction")
    except Exception as exc:  # too late for Discord: the answer goes to the channel instead
        log.warning("Discord: /%s was not acknowledged in time: %s", adapter.settings.command, exc)
        return
    adapter.interactions[key] = (interaction, time.monotonic())
    for old, (_, at) in list(adapter.interactions.items()):
        if time.monotonic() - at > INTERACTION_LIFE:
            adapter.interactions.pop(old, None)


async def _note(interaction: discord.Interaction, text: str) -> None:
    try:
        await call(interaction.response.send_message(text, ephemeral=True), "note")
    except Exception as exc:
        log.warning("Discord: cannot answer an interaction: %s", exc)
