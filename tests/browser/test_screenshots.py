"""The README's screenshots: every page scripts/screenshots.py photographs is in
docs/screenshots at both sizes, small, and linked from README.md, and nothing else is there.

Whether they are current is the script's job (run it after changing a page); this keeps
the set and the links from drifting apart.
"""

import importlib.util
import re
from types import ModuleType

from tests.browser.live import ROOT

SCREENSHOTS = ROOT / "docs" / "screenshots"
MAX_BYTES = 80_000
"""A palette PNG of one viewport is 15-55 kB; far more means the palette was lost."""


def screenshot_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts/screenshots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_page_is_photographed_at_both_sizes_and_linked() -> None:
    script = screenshot_script()
    assert set(script.WIDTHS) == {"desktop", "phone"}
    assert script.WIDTHS == {"desktop": (1280, 900), "phone": (390, 844)}
    shots = [*script.SHOTS, script.PHASE1_SHOT]
    expected = {f"{shot.name}-{size}.png" for shot in shots for size in script.WIDTHS}
    present = {path.name for path in SCREENSHOTS.glob("*.png")}
    assert present == expected

    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\(docs/screenshots/([\w-]+\.png)\)", readme))
    assert linked == expected
    for name in expected:
        size = (SCREENSHOTS / name).stat().st_size
        assert size <= MAX_BYTES, (name, size)
