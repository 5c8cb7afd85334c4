"""Text any database column can store: the check that the server's inputs and the pull's
options (app/pull_options.py, which the client imports too) share. Light: pydantic only."""

from typing import Annotated

from pydantic import AfterValidator


def storable(text: str) -> str:
    """``text`` unchanged; ValueError if it holds what no database column can store."""
    if "\x00" in text:
        raise ValueError("must not contain the NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode, without lone surrogates") from None
    return text


Text = Annotated[str, AfterValidator(storable)]
"""Text from a form, a query or a JSON body, refused (422) when a database could not store
it."""
