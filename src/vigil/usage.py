"""Token usage of a model call, split by how the provider bills it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one model response (or a sum of several).

    ``input_tokens`` counts only *uncached* input; the total prompt size is
    ``input_tokens + cache_read_tokens + cache_write_tokens``.
    """

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.output_tokens + other.output_tokens,
        )

    @property
    def prompt_tokens(self) -> int:
        """Every input token, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def cache_hit_ratio(self) -> float:
        """Share of prompt tokens served from the provider's cache (0.0 when there were none)."""
        total = self.prompt_tokens
        return self.cache_read_tokens / total if total else 0.0

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "output_tokens": self.output_tokens,
        }
