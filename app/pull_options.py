"""What a pull of labels may ask for: one definition that the API's route, the admin's
Export page, the Python client and ``steplabel remote pull`` all use.

Light on purpose: the client imports it, and the client needs neither FastAPI nor the
tables.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.storable import Text

Generation = Annotated[int, Field(ge=-1, le=2**31 - 1)]
"""app.inputs.GenerationNumber's bounds (the screening generation, -1, to the largest
INTEGER), written here so that the client need not import the tables; a test checks
that they agree."""


class PullOptions(BaseModel):
    """A pull's filters and format, as query parameters (``GET /api/v1/labels``)."""

    model_config = ConfigDict(frozen=True)

    format: Literal["prm800k", "trl"] = Field(
        "prm800k", description="PRM800K JSONL lines, or TRL stepwise rows."
    )
    since: Text | None = Field(
        None, max_length=64, description="The cursor the last pull gave: only newer labels."
    )
    generation: list[Generation | Literal["none"]] = Field(
        [], description="Only these generations; `none`: labels without one (phase 1)."
    )
    labeler: list[Text] = Field([], description="Only these labelers, by UUID or name.")
    consensus: bool = Field(False, description="One consensus label per solution.")
    include_qc: bool = Field(True, description="Quality-control labels.")
    include_screening: bool = Field(True, description="Screening labels.")

    @field_validator("since")
    @classmethod
    def _blank_is_none(cls, since: str | None) -> str | None:
        # A form sends its empty "since" field: no cursor.
        return since.strip() or None if since is not None else None

    def query(self) -> dict[str, Any]:
        """The options as a request's query parameters."""
        return self.model_dump(exclude_none=True)
