"""Demo step: calibrate the starter suite on the demo campaigns, so the calibration page has data."""

from __future__ import annotations

from apps.adaptive.services import calibration_create, engine_calibration
from apps.core.demo import DemoContext, demo_step
from tb_engine.irt import CalibrationError


@demo_step(order=50, name="calibrate the starter suite on the demo campaigns")
def calibrate_demo_suite(context: DemoContext) -> None:
    if context.options.get("no_campaigns"):
        return
    suite, team = context.shared["suite"], context.shared["demo_team"]
    try:
        row = calibration_create(suite=suite, team=team, user=context.shared["demo_user"])
    except CalibrationError as exc:
        context.notes.append(f"Calibration: skipped ({exc})")
        return
    cal = engine_calibration(row)
    context.notes.append(
        f"Calibration v{row.version} of {suite.name} on {row.n_campaigns} campaigns: {cal.dimension_note} "
        f"(/adaptive/suites/{suite.pk}/)"
    )
