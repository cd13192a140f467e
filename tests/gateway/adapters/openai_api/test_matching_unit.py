"""Properties of the exchange hash the API matches resent histories on, and of what a stream
still owes of its answer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vigil.gateway.adapters.openai_api.exchange import rest_of
from vigil.gateway.adapters.openai_api.matching import exchange_hash, extend
from vigil.gateway.adapters.openai_api.parsing import Message

texts = st.text(max_size=30)
messages = st.lists(st.builds(Message, st.sampled_from(["user", "assistant", "system"]), texts), max_size=8)


@given(prior=messages, question=texts.filter(str.strip), answer=texts)
def test_the_hash_of_the_question_extends_to_the_hash_of_the_resent_history(
    prior: list[Message], question: str, answer: str
) -> None:
    """(A request's new message is never blank: the API refuses one.)"""
    asked = exchange_hash([*prior, Message("user", question)])
    resent = [*prior, Message("user", question), Message("assistant", answer)]
    assert extend(asked, "assistant", answer) == exchange_hash(resent)


@given(prior=messages, answer=texts, system=texts)
def test_whitespace_and_system_messages_do_not_change_the_hash(prior: list[Message], answer: str, system: str) -> None:
    plain = exchange_hash([*prior, Message("assistant", answer)])
    rewrapped = [Message(m.role, f"  {' '.join(m.text.split())}\n") for m in prior]
    assert exchange_hash([Message("system", system), *rewrapped, Message("assistant", answer + "\n")]) == plain


def test_different_exchanges_have_different_hashes() -> None:
    base = [Message("user", "hi"), Message("assistant", "Hello.")]
    assert exchange_hash(base) != exchange_hash([Message("user", "hi"), Message("assistant", "Hello!")])
    assert exchange_hash(base) != exchange_hash([Message("assistant", "hi"), Message("user", "Hello.")])
    assert exchange_hash([Message("user", "a b")]) == exchange_hash([Message("user", "a"), Message("user", "b")])


@given(streamed=st.text(max_size=40), final=st.text(min_size=1, max_size=40))
def test_a_stream_ends_holding_the_whole_answer(streamed: str, final: str) -> None:
    whole = streamed + rest_of(streamed, final)
    assert " ".join(final.split()) in " ".join(whole.split())
    if final.startswith(streamed):
        assert whole == final
