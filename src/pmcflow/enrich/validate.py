"""Parse and check LLM answers before they enter the dataset.

Every answer is reduced to the text inside its tag (``<caption>…</caption>`` or
``<summary>…</summary>``) and checked; a rejected answer gets exactly one reason code:

``empty``         the model said nothing, or the tag is empty
``untagged``      no opening/closing tag pair
``too_long``      generation hit the token limit (answer truncated), or the text is longer than
                  allowed (subcaption: longer than the caption; summary: over ``max_words``)
``injection``     the answer carries instructions or chat markup that is not in the input
                  ("ignore previous instructions", "<|im_start|>", "as an AI", …)
``non_verbatim``  (subcaption) the text is not a substring of the caption after whitespace
                  normalisation
``ungrounded``    (summary) under ``min_support`` of its content words occur in the inputs
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pmcflow.enrich.text import normalize_ws, tokens

REASONS = ("empty", "untagged", "too_long", "injection", "non_verbatim", "ungrounded")

_INJECTION = re.compile(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier|preceding) (?:instructions|prompts?|rules)"
    r"|disregard (?:all |any )?(?:the )?(?:previous|prior|above|earlier) "
    r"|system prompt|developer mode|jailbreak|as an ai\b|as a language model|i cannot (?:help|assist)"
    r"|<\|im_(?:start|end)\|>|<\|(?:system|user|assistant|endoftext|eot_id)\|>"
    r"|\[/?inst\]|<</?sys>>|^\s*(?:system|assistant|user)\s*:",
    re.IGNORECASE | re.MULTILINE,
)

_STOP = frozenset(
    "a an the of in on at to for from by with and or as is are was were be been this that these those "
    "it its into than then which who whom whose what when where how not no nor but also both each all "
    "any such can may might could would should will shall has have had do does did we our they their "
    "there here".split()
)


@dataclass(frozen=True)
class Checked:
    """``text`` when the answer is accepted, else ``None`` with a ``reason`` from :data:`REASONS`."""

    text: str | None
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.text is not None


def extract_tagged(answer: str, tag: str) -> tuple[str | None, str | None]:
    """The first ``<tag>…</tag>`` content, or ``(None, reason)``; tolerant of a code fence."""
    if answer is None or not answer.strip():
        return None, "empty"
    low = answer.lower()
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    i = low.find(open_t)
    if i < 0:
        return None, "untagged"
    j = low.find(close_t, i + len(open_t))
    if j < 0:
        return None, "untagged"
    content = answer[i + len(open_t) : j].strip()
    if not content:
        return None, "empty"
    return content, None


def find_injection(answer: str, source: str) -> str | None:
    """An instruction-like phrase present in ``answer`` but not in ``source`` (the inputs)."""
    src = source.lower()
    for m in _INJECTION.finditer(answer):
        phrase = m.group(0).strip().lower()
        if phrase and phrase not in src:
            return phrase
    return None


def check_subcaption(answer: str, caption: str, *, truncated: bool = False) -> Checked:
    """Accept a ``<caption>`` answer only if it is a verbatim (whitespace-normalised) substring."""
    if truncated:
        return Checked(None, "too_long")
    content, reason = extract_tagged(answer, "caption")
    if content is None:
        return Checked(None, reason)
    if find_injection(answer, caption):
        return Checked(None, "injection")
    text = normalize_ws(content)
    cap = normalize_ws(caption)
    if len(text) > len(cap):
        return Checked(None, "too_long")
    if text not in cap:
        return Checked(None, "non_verbatim")
    return Checked(text, None)


def support(summary: str, inputs: str) -> float:
    """Share of the summary's content words (non-stopwords) that occur in ``inputs``."""
    words = [t for t in tokens(summary) if t not in _STOP]
    if not words:
        return 0.0
    vocab = set(tokens(inputs))
    return sum(1 for w in words if w in vocab) / len(words)


def check_summary(
    answer: str,
    inputs: str,
    *,
    max_words: int = 200,
    min_support: float = 0.5,
    truncated: bool = False,
) -> Checked:
    """Accept a ``<summary>`` answer that is short enough, clean and grounded in ``inputs``."""
    if truncated:
        return Checked(None, "too_long")
    content, reason = extract_tagged(answer, "summary")
    if content is None:
        return Checked(None, reason)
    if find_injection(answer, inputs):
        return Checked(None, "injection")
    text = normalize_ws(content)
    if len(text.split()) > max_words:
        return Checked(None, "too_long")
    if support(text, inputs) < min_support:
        return Checked(None, "ungrounded")
    return Checked(text, None)


# ---------------------------------------------------------------------------------------------
# Quality gates on every summary that would enter the dataset (any backend, extractive included)
# ---------------------------------------------------------------------------------------------
SUMMARY_GATES = ("summary_url", "summary_refusal", "summary_prompt_echo", "summary_not_english")

_URL = re.compile(r"(?i)\b(?:https?://|ftp://|www\.)\S+|\b10\.\d{4,9}/\S+")
_REFUSAL = re.compile(
    r"(?i)^\W*(?:i'?m sorry|i am sorry|sorry,|unfortunately,? i|i (?:cannot|can ?not|can't|am unable to|"
    r"'m unable to|do not have (?:access|enough)|don't have (?:access|enough))|as an ai\b|"
    r"as a (?:large )?language model|there is no (?:information|mention|context)|"
    r"the (?:provided )?(?:context|text|paragraphs?) (?:does|do) not (?:contain|mention|provide))"
)
_ENGLISH = frozenset(
    "the of and in to a is with for was were are by on that from as at this an be these or which "
    "we our not than between after during both each its their has have had been it into".split()
)
_ECHO_N = 8  # words in a row shared with the prompt's instructions that make an answer an echo


def _echo(text: str, instructions: str) -> str | None:
    words = tokens(text.lower())
    if len(words) < _ECHO_N:
        return None
    prompt = " " + " ".join(tokens(instructions.lower())) + " "
    for i in range(len(words) - _ECHO_N + 1):
        gram = " ".join(words[i : i + _ECHO_N])
        if f" {gram} " in prompt:
            return gram
    return None


def looks_english(text: str, min_words: int = 12, min_share: float = 0.12) -> bool:
    """Share of common English function words among the words (texts under ``min_words`` pass)."""
    words = [w.lower() for w in tokens(text) if any(c.isalpha() for c in w)]
    if len(words) < min_words:
        return True
    return sum(w in _ENGLISH for w in words) / len(words) >= min_share


def summary_gate(text: str | None, instructions: str = "") -> tuple[str, str] | None:
    """``(reason, detail)`` when a summary must not enter the dataset, else None.

    ``summary_url`` (a link), ``summary_refusal`` (the model declined or said there is nothing),
    ``summary_prompt_echo`` (eight words in a row copied from the prompt's instructions),
    ``summary_not_english`` (too few English function words for a text of twelve words or more).
    """
    if not text or not text.strip():
        return None
    m = _URL.search(text)
    if m:
        return "summary_url", f"contains {m.group(0)[:80]!r}"
    m = _REFUSAL.search(text)
    if m:
        return "summary_refusal", f"starts {m.group(0)[:80]!r}"
    gram = _echo(text, instructions) if instructions else None
    if gram:
        return "summary_prompt_echo", f"repeats the prompt: {gram!r}"
    if not looks_english(text):
        return "summary_not_english", "too few English function words"
    return None
